-- A webhook is bound to the row scope of the user who registered it (decisions.md §17): the
-- registrant (the last user to create or change the registration). Null for registrations made
-- before this column: they are not scoped.
ALTER TABLE "TB_WEBHOOK" ADD COLUMN IF NOT EXISTS "CREATED_BY" VARCHAR(100);
