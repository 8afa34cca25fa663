-- Events (issue 10, decisions.md §8): what the relay and the subscribers keep in the database.

-- The relay keeps per-aggregate order across several relays by looking for earlier unpublished
-- rows of the same aggregate.
CREATE INDEX IF NOT EXISTS "TB_ANAG_OUTBOX00_AGGREGATE_idx"
  ON "TB_ANAG_OUTBOX00" ("AGGREGATE_TYPE", "AGGREGATE_ID", "OUTBOX_ID");

-- Messages a subscriber has processed: its deduplication on the message id (= OUTBOX_ID).
CREATE TABLE IF NOT EXISTS "TB_EVENT_CONSUMED" (
  "SUBSCRIBER"  VARCHAR(60)    NOT NULL,
  "OUTBOX_ID"   BIGINT         NOT NULL,
  "CONSUMED_AT" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  PRIMARY KEY ("SUBSCRIBER", "OUTBOX_ID")
);
CREATE INDEX IF NOT EXISTS "TB_EVENT_CONSUMED_CONSUMED_AT_idx" ON "TB_EVENT_CONSUMED" ("CONSUMED_AT");

-- A webhook delivery to do: one per (registration, event), made by the dispatcher and worked off
-- by the delivery worker; pending retries survive a restart. BODY is the exact bytes sent and
-- signed. STATUS pending (NEXT_AT due), success or failed.
CREATE TABLE IF NOT EXISTS "TB_WEBHOOK_DELIVERY" (
  "DELIVERY_ID" BIGSERIAL      NOT NULL PRIMARY KEY,
  "WEBHOOK_ID"  INTEGER        NOT NULL,
  "OUTBOX_ID"   BIGINT         NOT NULL,
  "EVENT_TYPE"  VARCHAR(100)   NOT NULL,
  "BODY"        TEXT           NOT NULL,
  "STATUS"      VARCHAR(10)    NOT NULL DEFAULT 'pending',
  "ATTEMPTS"    INTEGER        NOT NULL DEFAULT 0,
  "NEXT_AT"     TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  "CREATED_AT"  TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  UNIQUE ("WEBHOOK_ID", "OUTBOX_ID")
);
CREATE INDEX IF NOT EXISTS "TB_WEBHOOK_DELIVERY_due_idx" ON "TB_WEBHOOK_DELIVERY" ("STATUS", "NEXT_AT");

-- The analytics writer's counts per tenant, dimension, event type and day.
CREATE TABLE IF NOT EXISTS "TB_EVENT_STATS" (
  "TENANT_ID"  VARCHAR(50)  NOT NULL,
  "DIMENSION"  VARCHAR(30)  NOT NULL,
  "EVENT_TYPE" VARCHAR(100) NOT NULL,
  "DAY"        DATE         NOT NULL,
  "COUNT"      BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY ("TENANT_ID", "DIMENSION", "EVENT_TYPE", "DAY")
);
