-- Usage history (docs/api.md, "Usage history"; docs/operations.md, "Usage history"): what each
-- workspace used, sampled every few seconds by the controller. A row covers the span_ms before
-- ts (CLOCK_REALTIME ms): cpu_usec, rx_bytes and tx_bytes were used within it (deltas of the
-- cgroup's and veth's counters, a counter that went back counted from zero), mem_bytes is the
-- memory in use (averaged over the span, mem_max its largest), pids the processes at its end.
-- Rows older than an hour are merged into one per minute, rows older than 24 h deleted; a
-- workspace's rows go with it.
CREATE TABLE usage_samples (
	workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	ts INTEGER NOT NULL,
	span_ms INTEGER NOT NULL,
	cpu_usec INTEGER NOT NULL,
	mem_bytes INTEGER NOT NULL,
	mem_max INTEGER NOT NULL,
	pids INTEGER NOT NULL,
	rx_bytes INTEGER NOT NULL,
	tx_bytes INTEGER NOT NULL,
	PRIMARY KEY (workspace_id, ts)
) WITHOUT ROWID;
CREATE INDEX usage_samples_ts ON usage_samples (ts);

-- The worker's totals over its workspaces (deleted ones included while their rows lived), one
-- row per tick, with the same columns and the same retention.
CREATE TABLE usage_worker (
	ts INTEGER PRIMARY KEY NOT NULL,
	span_ms INTEGER NOT NULL,
	cpu_usec INTEGER NOT NULL,
	mem_bytes INTEGER NOT NULL,
	mem_max INTEGER NOT NULL,
	pids INTEGER NOT NULL,
	rx_bytes INTEGER NOT NULL,
	tx_bytes INTEGER NOT NULL,
	workspaces INTEGER NOT NULL
);
