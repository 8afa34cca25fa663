-- What the search index of a dimension was last rebuilt from, per database (decisions.md, "Search
-- index rebuilt only when its fields change"): the codes of its searchable fields, in order
-- (src/metadata/search-text.ts searchSignature). A metadata event touching the dimension rebuilds
-- its TB_SEARCH rows only when its searchable fields differ from these, after a restart as well.
CREATE TABLE IF NOT EXISTS "TB_SEARCH_FIELDS" (
  "DIMENSION"  VARCHAR(30)    PRIMARY KEY,
  "FIELDS"     TEXT           NOT NULL,
  "UPDATED_AT" TIMESTAMPTZ(3) NOT NULL DEFAULT now()
);
