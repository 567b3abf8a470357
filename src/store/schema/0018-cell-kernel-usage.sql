-- A cell's kernel use (docs/api.md, "Execution"): the kernel's CPU time during the cell (the
-- agent's usage report as the cell started and as it ended) and its memory in use at the end;
-- NULL when a reading is missing (a controller restart during the cell, an agent without
-- resource reports, a kernel gone).
ALTER TABLE cells ADD COLUMN kernel_cpu_ms INTEGER;
ALTER TABLE cells ADD COLUMN kernel_memory_bytes INTEGER;
