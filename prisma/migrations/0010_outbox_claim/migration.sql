-- The relay's claim, measured under a stream of creates (issue 19, W4; docs/benchmarks.md "The
-- relay's claim walks its index").
--
-- The partial index on ("AGGREGATE_TYPE", "AGGREGATE_ID", "OUTBOX_ID") served the relay's check
-- that no older event of the same record was still unpublished; since one relay publishes at a
-- time in OUTBOX_ID order (decisions.md, "Order with several relays") nothing reads it. It cost
-- every create an index entry, and the planner took it for bitmap scans of the claim.
DROP INDEX IF EXISTS "TB_ANAG_OUTBOX00_unpublished_aggregate_idx";
