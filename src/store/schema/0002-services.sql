-- Services and their attempts (docs/api.md, "Services"). Times are CLOCK_REALTIME microseconds.

-- A definition and its current state. state is the API string (starting, running, backoff,
-- stopped, failed, exhausted); restart_policy too (no, on-failure, always).
CREATE TABLE services (
	id TEXT PRIMARY KEY NOT NULL,
	workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	name TEXT NOT NULL,
	command TEXT NOT NULL,
	cwd TEXT,
	env_json TEXT,
	restart_policy TEXT NOT NULL,
	max_restarts INTEGER NOT NULL,
	delay_ms INTEGER NOT NULL,
	backoff_permille INTEGER NOT NULL DEFAULT 0,
	max_delay_ms INTEGER NOT NULL DEFAULT 0,
	stop_signal INTEGER NOT NULL,
	stop_timeout_ms INTEGER NOT NULL,
	autostart INTEGER NOT NULL DEFAULT 0,
	max_output_bytes INTEGER NOT NULL,
	state TEXT NOT NULL,
	reason TEXT,
	restart_count INTEGER NOT NULL DEFAULT 0,
	next_restart_at INTEGER NOT NULL DEFAULT 0,
	main_pid INTEGER NOT NULL DEFAULT 0,
	current_attempt INTEGER NOT NULL DEFAULT 0,
	attempt_started_at INTEGER NOT NULL DEFAULT 0,
	next_attempt INTEGER NOT NULL DEFAULT 1,
	stopping INTEGER NOT NULL DEFAULT 0,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL,
	UNIQUE (workspace_id, name)
) STRICT;

-- One finished attempt. end_reason is the API string (exited, killed, stopped, restarted,
-- failed_to_start, daemonized, lost). The output blobs come last, as in runs.
CREATE TABLE service_attempts (
	service_id TEXT NOT NULL REFERENCES services (id) ON DELETE CASCADE,
	number INTEGER NOT NULL,
	started_at INTEGER NOT NULL DEFAULT 0,
	ended_at INTEGER NOT NULL DEFAULT 0,
	exit_code INTEGER NOT NULL DEFAULT -1,
	signal INTEGER NOT NULL DEFAULT 0,
	end_reason TEXT NOT NULL,
	reason TEXT,
	daemonized INTEGER NOT NULL DEFAULT 0,
	output_dropped INTEGER NOT NULL DEFAULT 0,
	stdout_total INTEGER NOT NULL DEFAULT 0,
	stderr_total INTEGER NOT NULL DEFAULT 0,
	stdout_head BLOB,
	stdout_tail BLOB,
	stderr_head BLOB,
	stderr_tail BLOB,
	PRIMARY KEY (service_id, number)
) STRICT;
