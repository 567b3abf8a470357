-- Names and labels (docs/api.md, "Names and labels"): a workspace's name, unique among its
-- tenant's workspaces on this worker (NULL: none), and its labels as a JSON object of string
-- values (NULL: none). The index answers a lookup by name and refuses a second holder.
ALTER TABLE workspaces ADD COLUMN name TEXT;
ALTER TABLE workspaces ADD COLUMN labels TEXT;
CREATE UNIQUE INDEX workspaces_name ON workspaces (tenant, name) WHERE name IS NOT NULL;
