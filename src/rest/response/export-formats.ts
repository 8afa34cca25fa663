// The bodies of an export (decisions §20), written page by page: CSV (RFC 4180 by csv-stringify,
// UTF-8, a header row of field codes, values in their REST JSON form, nulls empty and empty text
// quoted: `""`), NDJSON (one record a line) or a JSON array. Each page becomes one chunk; nothing
// but the page being written is held.
import { stringify } from "csv-stringify/sync";
import type { DataRecord } from "../../resolvers/read/index.ts";
import type { FieldDef } from "../../types.ts";

export const EXPORT_FORMATS = ["csv", "ndjson", "json"] as const;
export type ExportFormat = (typeof EXPORT_FORMATS)[number];

export const EXPORT_MEDIA_TYPES: Readonly<Record<ExportFormat, string>> = {
  csv: "text/csv; charset=utf-8",
  ndjson: "application/x-ndjson",
  json: "application/json; charset=utf-8",
};

/** A value as its REST JSON form's text: JSON values (objects, arrays) as JSON. */
function cellOf(value: unknown): unknown {
  if (value === null || value === undefined) return null;
  if (typeof value === "object") return JSON.stringify(value);
  if (typeof value === "boolean") return value ? "true" : "false";
  return value;
}

function csvPage(columns: readonly FieldDef[], page: readonly DataRecord[], header: boolean): string {
  const codes = columns.map((f) => f.code);
  return stringify(
    page.map((record) => codes.map((code) => cellOf(record[code]))),
    {
      ...(header ? { header: true, columns: codes } : {}),
      // An empty text is quoted, a null is not: an import tells them apart (import-body.ts).
      quoted_match: /^$/,
      record_delimiter: "\r\n",
    },
  );
}

/** The export's body as text chunks: a header (CSV, `[` of JSON) first, even with no rows. */
export async function* exportChunks(
  format: ExportFormat,
  columns: readonly FieldDef[],
  pages: AsyncIterable<DataRecord[]>,
): AsyncGenerator<string> {
  if (format === "csv") {
    yield csvPage(columns, [], true);
    for await (const page of pages) yield csvPage(columns, page, false);
    return;
  }
  if (format === "ndjson") {
    for await (const page of pages) yield `${page.map((r) => JSON.stringify(r)).join("\n")}\n`;
    return;
  }
  let first = true;
  yield "[";
  for await (const page of pages) {
    const items = page.map((r) => JSON.stringify(r)).join(",");
    yield first ? items : `,${items}`;
    first = false;
  }
  yield "]";
}
