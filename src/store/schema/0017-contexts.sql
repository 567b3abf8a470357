-- Code contexts (docs/api.md, "Code contexts"): a kernel the workspace's agent supervises as the
-- hidden service service_name, and its cells. A cell is a run (run_id) whose result the
-- controller read once the run ended; status 'running' until then, so a controller that was
-- away finishes it when it comes back. results_json and error_json are what it validated.
CREATE TABLE contexts (
	id TEXT PRIMARY KEY,
	workspace_id TEXT NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	language TEXT NOT NULL,
	cwd TEXT,
	env_json TEXT,
	service_name TEXT NOT NULL,
	state TEXT NOT NULL,
	reason TEXT,
	execution_count INTEGER NOT NULL DEFAULT 0,
	next_cell INTEGER NOT NULL DEFAULT 1,
	created_at INTEGER NOT NULL
);
CREATE INDEX contexts_workspace ON contexts (workspace_id, created_at);
CREATE TABLE cells (
	id TEXT PRIMARY KEY,
	context_id TEXT NOT NULL REFERENCES contexts (id) ON DELETE CASCADE,
	number INTEGER NOT NULL,
	run_id TEXT NOT NULL,
	status TEXT NOT NULL,
	execution_count INTEGER,
	results_json TEXT,
	error_json TEXT,
	created_at INTEGER NOT NULL,
	ended_at INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX cells_context ON cells (context_id, created_at);
