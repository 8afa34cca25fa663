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
      // A bare LF or CR in a value is quoted too (RFC 4180 §2.6): csv-stringify quotes only the
      // record delimiter itself (CRLF) once one is set, and most readers end a record at either.
      quote_record_delimiter: true,
    },
  );
}

function ndjsonPage(page: readonly DataRecord[]): string {
  return page.map((r) => `${JSON.stringify(r)}\n`).join("");
}

function jsonItems(page: readonly DataRecord[]): string {
  return page.map((r) => JSON.stringify(r)).join(",");
}

/**
 * The export's body as text chunks, a header (CSV, `[` of JSON) even with no rows. The first
 * chunk holds the first page (its statement run), never the header alone: the route awaits it
 * before the answer starts, so that a failing first statement is the standard error body, not a
 * 200 cut after its header (decisions.md, "Export and import").
 */
export async function* exportChunks(
  format: ExportFormat,
  columns: readonly FieldDef[],
  pages: AsyncIterable<DataRecord[]>,
): AsyncGenerator<string> {
  const iterator = pages[Symbol.asyncIterator]();
  try {
    const first = await iterator.next();
    const head = first.done ? [] : first.value;
    const rest = async function* () {
      if (first.done) return;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) yield next.value;
    };
    if (format === "csv") {
      yield csvPage(columns, head, true);
      for await (const page of rest()) yield csvPage(columns, page, false);
      return;
    }
    if (format === "ndjson") {
      // No rows, no chunk: an empty body.
      if (head.length) yield ndjsonPage(head);
      for await (const page of rest()) if (page.length) yield ndjsonPage(page);
      return;
    }
    let written = head.length > 0;
    yield `[${jsonItems(head)}`;
    for await (const page of rest()) {
      if (!page.length) continue;
      yield written ? `,${jsonItems(page)}` : jsonItems(page);
      written = true;
    }
    yield "]";
  } finally {
    // The consumer stopped early (the client went away): the pages' reader stops too.
    await iterator.return?.();
  }
}
