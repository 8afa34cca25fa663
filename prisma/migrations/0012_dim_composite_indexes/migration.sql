-- TB_DIM.INDEXES (docs/decisions.md, "Composite indexes declared in metadata"): composite indexes
-- of the dimension table, `CITY_ID,NAME;VIP,CREDIT_LIMIT`, each made on (TENANT_ID, fields…, id)
-- and dropped by the DDL sync. Null declares none.
ALTER TABLE "TB_DIM" ADD COLUMN IF NOT EXISTS "INDEXES" VARCHAR(1000);
