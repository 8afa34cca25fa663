-- The search indexer's documents (issue 10, decisions.md §8): one row per record with the words of
-- its searchable text fields, behind `$search` on REST lists and `search:` in GraphQL.
CREATE TABLE IF NOT EXISTS "TB_SEARCH" (
  "TENANT_ID"  VARCHAR(50)    NOT NULL,
  "DIMENSION"  VARCHAR(30)    NOT NULL,
  "RECORD_ID"  VARCHAR(100)   NOT NULL,
  "TEXT"       TEXT           NOT NULL,
  "OUTBOX_ID"  BIGINT         NOT NULL,
  "UPDATED_AT" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  PRIMARY KEY ("TENANT_ID", "DIMENSION", "RECORD_ID")
);
CREATE INDEX IF NOT EXISTS "TB_SEARCH_DOC_idx" ON "TB_SEARCH" USING GIN (to_tsvector('simple', "TEXT"));
