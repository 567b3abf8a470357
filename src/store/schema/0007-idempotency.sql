-- Idempotency keys of creating requests (docs/api.md, "Idempotency keys"). scope is the
-- request's path ("/v1/workspaces/<id>/commands"): a key is one per path. request_hash is the
-- SHA-256 (hex) of the canonical request (method, path, body bytes); object_id names what the
-- first request made (a workspace, run or terminal id, or a service name) and status is the
-- HTTP status it answered. Rows older than the retention window are purged.
CREATE TABLE idempotency_keys (
	scope TEXT NOT NULL,
	key TEXT NOT NULL,
	request_hash TEXT NOT NULL,
	object_id TEXT NOT NULL,
	status INTEGER NOT NULL,
	created_at INTEGER NOT NULL,
	PRIMARY KEY (scope, key)
) STRICT;
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
