-- TB_COST.VALIDATION (issue 39 §3; docs/decisions.md, "Validation rules"): a field's value rules
-- in its context, {"pattern", "min", "max", "min_length", "max_length", "values"}, checked on
-- every create and update. Null declares none.
ALTER TABLE "TB_COST" ADD COLUMN IF NOT EXISTS "VALIDATION" JSONB;
