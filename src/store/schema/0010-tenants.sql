-- Tenants (docs/security.md, "The tenant boundary"): the tenant a workspace belongs to, '' for
-- the operator's. Its runs, services, terminals, files and secrets belong to it through the
-- workspace. A warm pool member is the operator's until a tenant's create claims it.
ALTER TABLE workspaces ADD COLUMN tenant TEXT NOT NULL DEFAULT '';

-- Who imported or pulled an image: a row per tenant that did ('' for the operator). An image
-- without rows (stored before tenants) is the operator's. A tenant sees the operator's images
-- and its own.
CREATE TABLE image_owners (
	digest TEXT NOT NULL,
	tenant TEXT NOT NULL,
	PRIMARY KEY (digest, tenant)
) STRICT;
