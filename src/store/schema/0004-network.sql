-- A container workspace's network beyond "none" (src/net/net.h): its mode ("bridge" or
-- "restricted"), its IPv4 address (host byte order, unique on the worker: the lease) and, for
-- restricted, its egress policy as the API shows it. Every kernel object made for the workspace
-- is named from its id and address, so this row is all that teardown and reconcile need.
CREATE TABLE workspace_networks (
	workspace_id TEXT PRIMARY KEY NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
	mode TEXT NOT NULL,
	address INTEGER NOT NULL UNIQUE,
	policy_json TEXT,
	created_at INTEGER NOT NULL,
	updated_at INTEGER NOT NULL
) STRICT;
