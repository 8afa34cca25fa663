-- An update's event carries the values its record held before the change, for the fields that
-- changed (decisions.md §17, "Events of rows that leave a scope"): a row that leaves a
-- subscriber's or a webhook registrant's row scope is announced to them, judged on either state.
-- Not part of the payload (webhook bodies and subscription data are unchanged); NULL for creates
-- and deletes.
ALTER TABLE "TB_ANAG_OUTBOX00" ADD COLUMN IF NOT EXISTS "PREVIOUS" JSONB;
