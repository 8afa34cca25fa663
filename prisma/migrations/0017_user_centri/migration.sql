-- The further units a user may log in to (decisions.md §17): a login's centro_dett may name the
-- user's own CENTRO_DETT or one of these; the session's unit is then the row scope's value.
ALTER TABLE "TB_USER" ADD COLUMN IF NOT EXISTS "CENTRI" TEXT[] NOT NULL DEFAULT '{}';
