// The body of an import (decisions §20), read from the file it was spooled to
// (src/rest/import-spool.ts, which counted its bytes against IMPORT_MAX_BYTES), into ImportRow
// values for the import resolver (src/resolvers/write/import.ts): decoded as UTF-8 (400
// INVALID_ENCODING at the first row holding bytes that are not), then parsed: CSV by csv-parse (a
// header row of field codes; 400 INVALID_CSV for a malformed line) or NDJSON (one JSON value a
// line; 400 INVALID_JSON for one that is not). Rows are numbered as in the body: CSV's header is
// row 1, its records 2, 3, … (a spreadsheet's row numbers); NDJSON's rows are its lines. Each row
// is asked for by the resolver, so the file is read no faster than rows are written.
import { type Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream";
import { type CastingContext, parse as parseCsv } from "csv-parse";
import { BadRequestError } from "../errors.ts";
import type { ImportRow } from "../resolvers/write/import.ts";

export const IMPORT_MEDIA_TYPES = ["text/csv", "application/x-ndjson"] as const;
export type ImportFormat = "csv" | "ndjson";

/**
 * Bytes to text. Invalid UTF-8 does not stop the text here (it reads as U+FFFD): the line that
 * holds the first invalid byte is remembered, and the parser's reader refuses the row holding it,
 * so that the error names its row.
 */
class Utf8Text extends Transform {
  private readonly lenient = new TextDecoder("utf-8", { fatal: false, ignoreBOM: false });
  private readonly strict = new TextDecoder("utf-8", { fatal: true, ignoreBOM: false });
  private lines = 0;
  /** The 1-based line of the first invalid byte, once seen. */
  badLine: number | null = null;

  constructor() {
    super({ readableObjectMode: false, decodeStrings: true, encoding: "utf8" });
  }

  private check(chunk: Buffer | undefined, text: string): void {
    if (this.badLine === null) {
      try {
        this.strict.decode(chunk, { stream: chunk !== undefined });
      } catch {
        // Its line: the lines before this chunk and those of this chunk's text before the first
        // replacement character (a U+FFFD the body itself holds, earlier in the chunk, would move
        // the line up: the row reported is then an earlier one).
        const at = text.indexOf("\uFFFD");
        const before = at < 0 ? text : text.slice(0, at);
        this.badLine = this.lines + countLines(before) + 1;
      }
    }
    this.lines += countLines(text);
  }

  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    const text = this.lenient.decode(chunk, { stream: true });
    this.check(chunk, text);
    done(null, text);
  }

  override _flush(done: TransformCallback): void {
    const text = this.lenient.decode();
    this.check(undefined, text);
    done(null, text);
  }
}

function countLines(text: string): number {
  let n = 0;
  for (let i = text.indexOf("\n"); i >= 0; i = text.indexOf("\n", i + 1)) n++;
  return n;
}

function invalidEncoding(row: number): BadRequestError {
  return new BadRequestError(
    "INVALID_ENCODING",
    `Row ${row} holds bytes that are not UTF-8; an import body is UTF-8 text.`,
    { details: { row } },
  );
}

/** A CSV cell: text, or null for an empty unquoted one (an export writes empty text as `""`). */
function csvCell(value: string, context: CastingContext): string | null {
  return value === "" && !context.quoting ? null : value;
}

interface CsvRecord {
  record: Array<string | null>;
  info: { lines: number; records: number };
}

interface CsvFault {
  code: string;
  message: string;
  /** Records (the header included) parsed before the fault's. */
  records: number;
  lines: number;
}

function invalidCsv(fault: CsvFault): BadRequestError {
  const row = fault.records + 1;
  return new BadRequestError("INVALID_CSV", `Row ${row} is not valid CSV: ${fault.message}`, {
    details: { row, line: fault.lines, reason: fault.code },
  });
}

/**
 * A malformed record does not stop csv-parse (skip_records_with_error): it is remembered with the
 * count of records before it, and refused once those before it were taken (an error thrown by the
 * stream would drop the records it still holds, before the malformed one).
 */
async function* csvRows(text: Readable, utf8: Utf8Text): AsyncGenerator<ImportRow> {
  const faults: { first: CsvFault | null } = { first: null };
  const parser = text.pipe(
    parseCsv({
      bom: true,
      info: true,
      cast: csvCell,
      skip_empty_lines: true,
      skip_records_with_error: true,
      on_skip: (err) => {
        const e = err as unknown as Partial<CsvFault> | undefined;
        faults.first ??= {
          code: String(e?.code ?? "CSV_INVALID"),
          message: String(e?.message ?? "malformed record"),
          records: Number(e?.records ?? 0),
          lines: Number(e?.lines ?? 0),
        };
        return undefined;
      },
      max_record_size: 64 * 1024 * 1024,
    }),
  );
  text.once("error", (err) => parser.destroy(err));
  let header: string[] | null = null;
  let row = 0;
  try {
    for await (const { record, info } of parser as AsyncIterable<CsvRecord>) {
      const seen = faults.first;
      if (seen !== null && info.records > seen.records) break;
      row = info.records;
      if (utf8.badLine !== null && utf8.badLine <= info.lines) throw invalidEncoding(row);
      if (header === null) {
        header = checkedHeader(record);
        continue;
      }
      const values: Record<string, string | null> = {};
      header.forEach((name, i) => {
        values[name] = record[i] ?? null;
      });
      yield { row, values, textual: true };
    }
  } catch (err) {
    // A fault csv-parse does not skip (a record over max_record_size): the same refusal.
    const e = err as Partial<CsvFault> | null;
    if (typeof e?.code !== "string" || !e.code.startsWith("CSV_")) throw err;
    throw invalidCsv({ code: e.code, message: String(e.message), records: row, lines: Number(e.lines ?? 0) });
  }
  if (faults.first !== null) throw invalidCsv(faults.first);
  if (utf8.badLine !== null) throw invalidEncoding(row + 1);
}

function checkedHeader(record: ReadonlyArray<string | null>): string[] {
  const names = record.map((name) => (name ?? "").trim());
  const seen = new Set<string>();
  for (const name of names) {
    if (name === "" || seen.has(name)) {
      throw new BadRequestError(
        "INVALID_CSV",
        name === ""
          ? "Row 1, the header, has an empty column name."
          : `Row 1, the header, names ${name.slice(0, 60)} twice.`,
        { details: { row: 1, line: 1, reason: "CSV_HEADER" } },
      );
    }
    seen.add(name);
  }
  return names;
}

async function* ndjsonRows(text: Readable, utf8: Utf8Text): AsyncGenerator<ImportRow> {
  let rest = "";
  let row = 0;
  const lineRow = function* (line: string): Generator<ImportRow> {
    row++;
    if (utf8.badLine !== null && utf8.badLine <= row) throw invalidEncoding(row);
    const trimmed = line.endsWith("\r") ? line.slice(0, -1) : line;
    if (trimmed.trim() === "") return;
    let values: unknown;
    try {
      values = JSON.parse(trimmed);
    } catch (err) {
      throw new BadRequestError("INVALID_JSON", `Row ${row} is not valid JSON: ${(err as Error).message}`, {
        details: { row, line: row },
      });
    }
    yield { row, values, textual: false };
  };
  for await (const chunk of text as AsyncIterable<string>) {
    const lines = (rest + chunk).split("\n");
    rest = lines.pop() ?? "";
    for (const line of lines) yield* lineRow(line);
  }
  if (rest !== "") yield* lineRow(rest);
  if (utf8.badLine !== null) throw invalidEncoding(row + 1);
}

/**
 * The rows of an import body read from `body` (the spooled file's stream), which is destroyed
 * once the rows stop (all read, or one refused).
 */
export function importRows(body: Readable, format: ImportFormat): AsyncGenerator<ImportRow> {
  const utf8 = new Utf8Text();
  const text = pipeline(body, utf8, () => {});
  const rows = format === "csv" ? csvRows(text, utf8) : ndjsonRows(text, utf8);
  return (async function* () {
    try {
      yield* rows;
    } finally {
      utf8.destroy();
      body.destroy();
    }
  })();
}
