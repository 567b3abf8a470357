-- A workspace's exposed ports (docs/api.md, "Previews"): one row per (workspace, port), its
-- host label (unique: the preview listener finds an exposure by it), its access ("token" or
-- "public"), the SHA-256 of its token as lower-case hex (NULL for a public one: the token
-- itself is shown once and never kept), and its lifetime in CLOCK_REALTIME µs. The rows go
-- with their workspace.
CREATE TABLE workspace_ports (
	workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	port INTEGER NOT NULL,
	label TEXT NOT NULL UNIQUE,
	access TEXT NOT NULL,
	token_hash TEXT,
	expires_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, port)
) STRICT;
CREATE INDEX workspace_ports_expires ON workspace_ports (expires_at);
