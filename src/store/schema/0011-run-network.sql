-- What a run's workspace network refused while it ran (docs/api.md, "Runs", network):
-- {"denied": N, "lastDenied": {...}} as the API shows it; NULL for a run without a network
-- (and for runs recorded before this column).
ALTER TABLE runs ADD COLUMN network_json TEXT;
