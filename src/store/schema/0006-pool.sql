-- Warm pool members (docs/operations.md, "Warm pool"): started, idle container workspaces no
-- client has claimed yet. pool is the key of the pool that made it (runtime, image, network,
-- seccomp profile and HOME size); a claim deletes the row in the transaction that makes the
-- workspace a normal one, so a member is handed out at most once.
CREATE TABLE pool_members (
	workspace_id TEXT PRIMARY KEY NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	pool TEXT NOT NULL
) STRICT;
