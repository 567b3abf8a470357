-- Whether a snapshot's image is on disk: a snapshot is answered once its layer is written and
-- hashed, and its image fsync()ed right after (durable 0 until then). A row still 0 at start
-- is checked against its image (every blob's content against its digest): made durable when
-- it holds, else removed. Rows from before this column were fsync()ed before their answer.
ALTER TABLE snapshots ADD COLUMN durable INTEGER NOT NULL DEFAULT 1;
