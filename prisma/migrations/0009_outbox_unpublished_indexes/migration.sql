-- What the event side writes per event, cut (issue 19, W4; docs/decisions.md "The outbox's
-- indexes cover unpublished rows only").
--
-- The relay's claim and its per-aggregate order look only at unpublished rows: both indexes are
-- now partial on "PUBLISHED_AT" IS NULL. The relay's mark then inserts into the primary key
-- alone (a partial index takes no entry for a row outside its predicate), not into all three,
-- and the indexes stay the size of the backlog instead of growing with the retention.
CREATE INDEX IF NOT EXISTS "TB_ANAG_OUTBOX00_unpublished_idx"
  ON "TB_ANAG_OUTBOX00" ("OUTBOX_ID") WHERE "PUBLISHED_AT" IS NULL;
CREATE INDEX IF NOT EXISTS "TB_ANAG_OUTBOX00_unpublished_aggregate_idx"
  ON "TB_ANAG_OUTBOX00" ("AGGREGATE_TYPE", "AGGREGATE_ID", "OUTBOX_ID") WHERE "PUBLISHED_AT" IS NULL;
DROP INDEX IF EXISTS "TB_ANAG_OUTBOX00_PUBLISHED_AT_OUTBOX_ID_idx";
DROP INDEX IF EXISTS "TB_ANAG_OUTBOX00_AGGREGATE_idx";

-- A subscriber's marks are pruned by message id (those of messages older than the oldest outbox
-- row kept, through the primary key), no longer by time: the index on "CONSUMED_AT" took an
-- entry per mark, two per event.
DROP INDEX IF EXISTS "TB_EVENT_CONSUMED_CONSUMED_AT_idx";
