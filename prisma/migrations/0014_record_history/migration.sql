-- Record history (issue 39 §1; docs/decisions.md, "Record history"): one revision row per create,
-- update, delete, state change, command and restore of a record, written in the write's own
-- transaction. CHANGES holds only the fields that changed, {FIELD: {before, after}}, values in
-- their REST JSON form. TB_DIM.HISTORY (default true) turns it off for a dimension.
ALTER TABLE "TB_DIM" ADD COLUMN IF NOT EXISTS "HISTORY" BOOLEAN NOT NULL DEFAULT true;

CREATE TABLE IF NOT EXISTS "TB_HISTORY" (
  "TENANT_ID"  VARCHAR(50)    NOT NULL,
  "DIMENSION"  VARCHAR(30)    NOT NULL,
  "RECORD_ID"  TEXT           NOT NULL,
  "REVISION"   INTEGER        NOT NULL,
  "CHANGED_AT" TIMESTAMPTZ(3) NOT NULL DEFAULT now(),
  "USER_ID"    VARCHAR(100)   NOT NULL,
  "OPERATION"  VARCHAR(10)    NOT NULL,
  "CHANGES"    JSONB          NOT NULL,
  PRIMARY KEY ("TENANT_ID", "DIMENSION", "RECORD_ID", "REVISION")
);
-- The retention clean-up's walk (src/history/retention.ts): oldest revisions first. BRIN: rows
-- arrive in time order, and a BRIN index costs an insert next to nothing (a btree one a write).
CREATE INDEX IF NOT EXISTS "TB_HISTORY_CHANGED_AT_idx" ON "TB_HISTORY" USING BRIN ("CHANGED_AT");
