// Lays one metadata change over the stored rows (in memory), so that the result can be validated
// as a whole before anything is written.
import { ConflictError, NotFoundError } from "../../errors.ts";
import type { MetadataCode, MetadataRows } from "../../types.ts";
import type { MetadataWriteInput, Row } from "./input.ts";
import { keyOf, METADATA_TABLES, type MetadataTable } from "../../metadata/tables.ts";

export interface AppliedChange {
  existing: Row | null;
  /** The row as it is to be stored (null for a delete). */
  written: Row | null;
  /** Rows removed along with a deleted DIM or VAR. */
  removed: Array<[MetadataTable, Row]>;
  /** Rows created along with a new DIM (its fields). */
  added: Array<[MetadataTable, Row]>;
}

function sameKey(t: MetadataTable, row: Row, key: Row): boolean {
  return t.key.every((k) => String(row[k]) === String(key[k]));
}

/** Rows that go with a removed DIM or VAR row (its fields, configurations, relations…). */
function dependents(code: MetadataCode, row: Row): Array<[keyof MetadataRows, (r: Row) => boolean]> {
  if (code === "DIM") {
    const own = (r: Row) => r.COD_DIM === row.COD_DIM;
    return [
      ["TB_VAR", own],
      ["TB_COST", own],
      ["TB_OBJECT", own],
      ["TB_SORT", own],
      ["TB_DOCUMENT", own],
    ];
  }
  if (code === "VAR") {
    const field = (r: Row) => r.COD_DIM === row.COD_DIM && r.COD_VAR === row.COD_VAR;
    return [
      ["TB_COST", field],
      ["TB_OBJECT", field],
    ];
  }
  return [];
}

function tableByName(name: keyof MetadataRows): MetadataTable {
  return Object.values(METADATA_TABLES).find((t) => t.table === name)!;
}

/** Applies the change to `rows` in place; 409 or 404 when the key exists or does not. */
export function applyChange(rows: MetadataRows, input: MetadataWriteInput): AppliedChange {
  const { table: t, op, key, data } = input;
  const tables = rows as unknown as Record<string, Row[]>;
  const list = tables[t.table]!;
  const lookup = key ?? data!;
  const index = list.findIndex((r) => sameKey(t, r, lookup));
  const existing = index >= 0 ? list[index]! : null;
  if (op === "create" && existing) {
    throw new ConflictError("DUPLICATE_KEY", `${t.code} ${keyOf(t, lookup)} exists already.`);
  }
  if (op !== "create" && !existing) {
    throw new NotFoundError("RECORD_NOT_FOUND", `${t.code} ${keyOf(t, lookup)} does not exist.`);
  }
  if (op === "delete") {
    list.splice(index, 1);
    const removed: Array<[MetadataTable, Row]> = [];
    for (const [name, match] of dependents(t.code, existing!)) {
      const all = tables[name]!;
      for (const r of all.filter(match)) removed.push([tableByName(name), r]);
      tables[name] = all.filter((r) => !match(r));
    }
    return { existing, written: null, removed, added: [] };
  }
  const written = op === "patch" ? { ...existing!, ...data } : { ...data, ...(key ?? {}) };
  if (index >= 0) list[index] = written;
  else list.push(written);
  tables.TB_VAR!.push(...input.newFields);
  return { existing, written, removed: [], added: input.newFields.map((f) => [METADATA_TABLES.VAR, f]) };
}
