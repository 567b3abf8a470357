-- A workspace's secrets (docs/api.md, "Secrets"): the value only sealed with AES-256-GCM under
-- <root>/secrets.key (src/store/secret-box.h), the workspace id and the name as associated
-- data, so a row moved to another workspace or name no longer opens. expires_at 0: never.
CREATE TABLE workspace_secrets (
	workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	nonce BLOB NOT NULL,
	ciphertext BLOB NOT NULL,
	host TEXT,
	username TEXT NOT NULL,
	expires_at INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, name)
) STRICT;
