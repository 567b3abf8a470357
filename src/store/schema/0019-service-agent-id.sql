-- The id the workspace's agent knows a service by, when it is not the row's own: a service
-- carried into a workspace restored from a memory snapshot keeps its source's id in the
-- restored agent, while its row takes a new one (ids are unique across workspaces). NULL: id.
ALTER TABLE services ADD COLUMN agent_id TEXT;
