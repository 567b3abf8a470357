-- Pause (docs/api.md, "Pause and resume"): when a workspace's state became "paused", in
-- CLOCK_REALTIME µs; 0 while it is not paused. The state column holds "paused" itself.
ALTER TABLE workspaces ADD COLUMN paused_at INTEGER NOT NULL DEFAULT 0;
