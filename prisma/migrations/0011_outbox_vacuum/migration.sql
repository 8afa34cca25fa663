-- The outbox is vacuumed by the number of rows the relay has marked, not by its size (issue 19,
-- W4; docs/decisions.md "The relay's claim walks its index").
--
-- Every row the relay marks leaves a dead entry in the partial index on unpublished rows. The
-- claim's index scan steps over those entries (once marked dead, about 370 to a page) until a
-- vacuum removes them: 300,000 of them cost a claim 1.7 ms and 823 pages, none 0.04 ms and 2.
-- Autovacuum's default waits for 20 % of the table, and the outbox keeps its retention's rows: on
-- a large outbox the claims would grow dearer for hours. Vacuum after 50,000 dead rows whatever
-- the table's size, and always clean the indexes: a vacuum skips them when the dead rows sit on
-- under 2 % of the table's pages (as here, where they are the newest few), which would leave the
-- partial index's dead entries where they are.
ALTER TABLE "TB_ANAG_OUTBOX00" SET (
  autovacuum_vacuum_scale_factor = 0,
  autovacuum_vacuum_threshold = 50000,
  vacuum_index_cleanup = on
);
