-- Snapshots (docs/api.md, "Snapshots and fork"): a workspace's HOME and root filesystem
-- changes stored as an image (image, its digest; base_image, the workspace's image it was
-- made on). The row outlives its workspace (no foreign key): workspace_id says where it came
-- from. tenant '' is the operator's. memory: 1 when the processes were checkpointed too.
-- Times in CLOCK_REALTIME µs, paused_ms how long the workspace was paused for it.
CREATE TABLE snapshots (
	id TEXT PRIMARY KEY,
	workspace_id TEXT NOT NULL,
	tenant TEXT NOT NULL DEFAULT '',
	name TEXT,
	image TEXT NOT NULL,
	base_image TEXT NOT NULL,
	size_bytes INTEGER NOT NULL,
	memory INTEGER NOT NULL DEFAULT 0,
	paused_ms INTEGER NOT NULL,
	created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX snapshots_tenant ON snapshots (tenant, created_at);
