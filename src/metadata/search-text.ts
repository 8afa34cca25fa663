// A record's search text (decisions.md §8, "Search follows field visibility"), derived from the
// metadata: which fields of a dimension are searchable, and the text of a record over them, from
// an event's payload (the search indexer, src/events/search.ts) or from the record's columns in SQL
// (the indexer's rebuild, and the `$search` check of src/query/compile.ts). Both derivations are
// here, side by side, because they must agree: the query side reads what the event side wrote.
import { ident } from "../db/sql.ts";
import type { FieldConfig, FieldDef } from "../types.ts";
import { perDefinition } from "./per-definition.ts";

/** Longest text kept per record (the index is for finding records, not storing them). */
export const MAX_TEXT = 64 * 1024;

const searchableIn = (config: FieldConfig) => config.flags.has("R") && config.codUtente === null;

/**
 * A dimension's searchable fields (once per definition): STRING and TEXT, with R and no weight in
 * the default configuration and in every CENTER_DETT one (a caller chooses the context, and a
 * field a context hides is hidden to whoever asks in it).
 */
export const searchableFields = perDefinition((dim): readonly FieldDef[] =>
  dim.fields.filter(
    (f) =>
      (f.dataType === "STRING" || f.dataType === "TEXT") &&
      searchableIn(f.config) &&
      [...f.contextConfigs.values()].every(searchableIn),
  ),
);

/**
 * What a dimension's index text is derived from: its searchable fields' codes, in order. Rows
 * derived under one signature are what rows derived under another are not.
 */
export const searchSignature = perDefinition((dim): string =>
  searchableFields(dim)
    .map((f) => f.code)
    .join(","),
);

/**
 * The index text of a record in SQL, over the alias `alias`: what the indexer derives from an
 * event's payload (searchText: the non-empty values of `fields`, in order, joined by spaces, cut to
 * MAX_TEXT), from the record's columns. The `$search` check (compile.ts) and the rebuild use it.
 */
export function searchTextSql(fields: readonly FieldDef[], alias: string): string {
  if (fields.length === 0) return "''";
  const values = fields.map((f) => `NULLIF(${alias}.${ident(f.code)}, '')`).join(", ");
  return `left(concat_ws(' ', ${values}), ${MAX_TEXT})`;
}

/** A record's index text from an event's payload (as searchTextSql from its columns). */
export function searchText(fields: readonly FieldDef[], payload: Record<string, unknown>): string {
  const text = fields
    .map((f) => payload[f.code])
    .filter((v): v is string => typeof v === "string" && v.length > 0)
    .join(" ");
  return text.length <= MAX_TEXT ? text : cutToCharacters(text, MAX_TEXT);
}

/** The first `max` characters (code points, as SQL's left() counts them) of a longer text. */
function cutToCharacters(text: string, max: number): string {
  let units = 0;
  let chars = 0;
  for (const ch of text) {
    if (chars === max) break;
    units += ch.length;
    chars++;
  }
  return text.slice(0, units);
}
