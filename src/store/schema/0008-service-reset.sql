-- A service's restart budget resets after an attempt that ran this long (docs/api.md,
-- "Services", restart.resetAfterMs); 0: never.
ALTER TABLE services ADD COLUMN reset_after_ms INTEGER NOT NULL DEFAULT 60000;
