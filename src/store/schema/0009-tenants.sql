-- Tenants (docs/security.md, "The tenant boundary"): the tenant a workspace belongs to, '' for
-- the operator's. Its runs, services, terminals, files and secrets belong to it through the
-- workspace. A warm pool member is the operator's until a tenant's create claims it.
ALTER TABLE workspaces ADD COLUMN tenant TEXT NOT NULL DEFAULT '';
