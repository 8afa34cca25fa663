-- Databases per tenant (issue 36 §2, decisions.md §18): TB_TENANT.DATABASE names the database
-- profile (DATABASE_URL_<NAME>) holding the tenant's records, outbox, webhooks, search and
-- analytics; null is the main database. Every process keeps the tenant → profile map in memory
-- and reads it again when the database announces a change of TB_TENANT on "dimensio_tenants"
-- (direct SQL, the import CLI and tenant:move alike). Payload: the TENANT_ID.

ALTER TABLE "TB_TENANT" ADD COLUMN IF NOT EXISTS "DATABASE" VARCHAR(63);
-- Set while `npm run tenant:move` copies the tenant's rows to another database: its writes are
-- answered 503 TENANT_MOVING with Retry-After meanwhile, its reads go on.
ALTER TABLE "TB_TENANT" ADD COLUMN IF NOT EXISTS "MOVING_SINCE" TIMESTAMPTZ(3);

CREATE OR REPLACE FUNCTION "dimensio_tenant_changed"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' THEN
    PERFORM pg_notify('dimensio_tenants', OLD."TENANT_ID");
  END IF;
  IF TG_OP <> 'DELETE' THEN
    PERFORM pg_notify('dimensio_tenants', NEW."TENANT_ID");
  END IF;
  RETURN NULL;
END $$;

DROP TRIGGER IF EXISTS "TB_TENANT_notify" ON "TB_TENANT";
CREATE TRIGGER "TB_TENANT_notify"
  AFTER INSERT OR DELETE OR UPDATE ON "TB_TENANT" FOR EACH ROW EXECUTE FUNCTION "dimensio_tenant_changed"();
