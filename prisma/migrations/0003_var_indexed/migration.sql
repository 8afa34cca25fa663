-- TB_VAR.INDEXED (decisions.md §2): the dimension table gets an index on (TENANT_ID, field), made
-- and dropped by the DDL sync. Null counts as false.
ALTER TABLE "TB_VAR" ADD COLUMN IF NOT EXISTS "INDEXED" BOOLEAN DEFAULT false;
