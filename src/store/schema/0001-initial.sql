-- Initial schema. Times are CLOCK_REALTIME microseconds.

CREATE TABLE workspaces (
	id TEXT PRIMARY KEY NOT NULL,
	worker TEXT NOT NULL,
	adapter TEXT NOT NULL,
	state TEXT NOT NULL,
	reason TEXT,
	spec_json TEXT,
	cgroup TEXT,
	agent_secret TEXT,
	agent_pid INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;

-- status is enum run_status (src/domain/state.h), 0 = running. The output blobs come
-- last so reading the other columns never walks their overflow pages.
CREATE TABLE runs (
	id TEXT PRIMARY KEY NOT NULL,
	workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	command TEXT NOT NULL,
	cwd TEXT,
	env_json TEXT,
	timeout_ms INTEGER NOT NULL,
	max_output_bytes INTEGER NOT NULL,
	status INTEGER NOT NULL,
	exit_code INTEGER NOT NULL DEFAULT -1,
	signal INTEGER NOT NULL DEFAULT 0,
	oom_killed INTEGER NOT NULL DEFAULT 0,
	truncated INTEGER NOT NULL DEFAULT 0,
	reason TEXT,
	stdout_total INTEGER NOT NULL DEFAULT 0,
	stderr_total INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	started_at INTEGER NOT NULL DEFAULT 0,
	ended_at INTEGER NOT NULL DEFAULT 0,
	cpu_usec INTEGER NOT NULL DEFAULT 0,
	peak_memory INTEGER NOT NULL DEFAULT 0,
	stdout_head BLOB,
	stdout_tail BLOB,
	stderr_head BLOB,
	stderr_tail BLOB
) STRICT;

CREATE INDEX runs_workspace_created ON runs (workspace_id, created_at);
CREATE INDEX runs_status ON runs (status);

-- API tokens: only the SHA-256 of the token, as lower-case hex.
CREATE TABLE tokens (
	id INTEGER PRIMARY KEY,
	name TEXT NOT NULL,
	hash TEXT NOT NULL UNIQUE,
	created_at INTEGER NOT NULL
) STRICT;
