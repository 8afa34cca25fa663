-- Row scope (decisions.md §17; docs/decisions.md, "Row scope"): TB_DIM.ROW_SCOPE names the scope
-- keys of a dimension (centro_dett, ambiente, owner; null: unscoped); a grant's ROW_FILTER is a
-- $filter expression with {user}, {tenant}, {centro_dett}, {ambiente} and {source} standing for
-- the caller's values; TB_USER.CENTRI lists the further units a user may log in to.
ALTER TABLE "TB_DIM" ADD COLUMN IF NOT EXISTS "ROW_SCOPE" VARCHAR(100);
ALTER TABLE "TB_USER_GRANT" ADD COLUMN IF NOT EXISTS "ROW_FILTER" VARCHAR(2000);
