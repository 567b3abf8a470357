-- Terminals (docs/api.md, "Terminals"). Times are CLOCK_REALTIME microseconds.

-- state is the API string: starting, running, exited, closed (force-closed), failed, lost.
-- exit_code -1 and signal 0 mean none.
CREATE TABLE terminals (
	id TEXT PRIMARY KEY NOT NULL,
	workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	command TEXT,
	cwd TEXT,
	env_json TEXT,
	cols INTEGER NOT NULL,
	rows INTEGER NOT NULL,
	state TEXT NOT NULL,
	reason TEXT,
	pid INTEGER NOT NULL DEFAULT 0,
	exit_code INTEGER NOT NULL DEFAULT -1,
	signal INTEGER NOT NULL DEFAULT 0,
	output_bytes INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	started_at INTEGER NOT NULL DEFAULT 0,
	ended_at INTEGER NOT NULL DEFAULT 0
) STRICT;

CREATE INDEX terminals_workspace_created ON terminals (workspace_id, created_at);
