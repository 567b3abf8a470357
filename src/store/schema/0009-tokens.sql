-- Scoped tokens (docs/api.md, "Tokens"): an id the API names them by ("admin" for the admin
-- token), a scope, a tenant, the caps on what they create (0: none), and their lifetime in
-- CLOCK_REALTIME µs (0: never / not yet).
ALTER TABLE tokens ADD COLUMN token_id TEXT;
ALTER TABLE tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'admin';
ALTER TABLE tokens ADD COLUMN tenant TEXT;
ALTER TABLE tokens ADD COLUMN cpus_milli INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN memory_mb INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN pids_limit INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN workspaces INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN expires_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN revoked_at INTEGER NOT NULL DEFAULT 0;
ALTER TABLE tokens ADD COLUMN last_used_at INTEGER NOT NULL DEFAULT 0;
UPDATE tokens SET token_id = CASE WHEN name = 'admin' THEN 'admin' ELSE 'tok-' || id END;
CREATE UNIQUE INDEX tokens_token_id ON tokens (token_id);

-- The audit log (docs/api.md, "Audit"): one row per request that carried a bearer token, and
-- per mutating request on the unix socket. Bounded by --audit-kept, oldest rows dropped.
CREATE TABLE audit (
	id INTEGER PRIMARY KEY,
	at INTEGER NOT NULL,
	token_id TEXT,
	token_name TEXT,
	tenant TEXT,
	method TEXT NOT NULL,
	route TEXT NOT NULL,
	path TEXT NOT NULL,
	workspace_id TEXT,
	object_id TEXT,
	status INTEGER NOT NULL,
	outcome TEXT NOT NULL
) STRICT;
CREATE INDEX audit_token ON audit (token_id, id);
CREATE INDEX audit_workspace ON audit (workspace_id, id);
CREATE INDEX audit_tenant ON audit (tenant, id);
