-- Record ids are as long as their id field allows (a STRING id: its LENGTH, 255 when absent, up to
-- 10485760), so the outbox's AGGREGATE_ID and the import ledger's RECORD_ID hold any length.
-- Changing a column to the type it already has is a no-op: running this again changes nothing.
ALTER TABLE "TB_ANAG_OUTBOX00" ALTER COLUMN "AGGREGATE_ID" TYPE TEXT;
ALTER TABLE "TB_IMPORT_LEDGER" ALTER COLUMN "RECORD_ID" TYPE TEXT;
