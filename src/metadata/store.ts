// Reads and writes the metadata tables with SQL on the caller's connection: inside a metadata
// write's transaction (Prisma cannot join it), metadata, table DDL and the version bump commit
// together. The tables' keys and columns come from src/metadata/tables.ts.
import { ident } from "../db/sql.ts";
import type { MetadataRows, Queryable } from "../types.ts";
import { METADATA_TABLES } from "./tables.ts";

export const METADATA_CHANNEL = "dimensio_metadata";

/** Every metadata row, on `q` (the database, or an open transaction to see its own writes). */
export async function readMetadataRows(q: Queryable): Promise<MetadataRows> {
  const out: Partial<Record<keyof MetadataRows, unknown[]>> = {};
  for (const t of Object.values(METADATA_TABLES)) {
    const res = await q.query(
      `SELECT ${t.columns.map(ident).join(", ")} FROM ${ident(t.table)} ORDER BY ${t.key.map(ident).join(", ")}`,
    );
    out[t.table] = res.rows;
  }
  return out as MetadataRows;
}

export async function readMetadataVersion(q: Queryable): Promise<number> {
  const res = await q.query<{ VERSION: number | string }>(
    `SELECT "VERSION" FROM "TB_META_STATE" WHERE "ID" = 1`,
  );
  const row = res.rows[0];
  return row ? Number(row.VERSION) : 1;
}

/** Serialises metadata writes (REST and the importer) across processes: each sees the latest rows. */
const METADATA_WRITE_LOCK = 724_461_003;

/** Takes the metadata write lock until the caller's transaction ends. */
export async function lockMetadataWrites(tx: Queryable): Promise<void> {
  await tx.query("SELECT pg_advisory_xact_lock($1)", [METADATA_WRITE_LOCK]);
}

/** Increments the metadata version and tells every process (NOTIFY is delivered on commit). */
export async function bumpMetadataVersion(tx: Queryable): Promise<number> {
  const res = await tx.query<{ VERSION: number }>(
    `UPDATE "TB_META_STATE" SET "VERSION" = "VERSION" + 1, "UPDATED_AT" = now() WHERE "ID" = 1 RETURNING "VERSION"`,
  );
  const version = Number(res.rows[0]?.VERSION ?? 1);
  await tx.query("SELECT pg_notify($1, $2)", [METADATA_CHANNEL, String(version)]);
  return version;
}

/** JSON columns: sent as text, stored as JSONB. */
const JSON_COLUMNS: ReadonlySet<string> = new Set(["DEFINITION", "VALIDATION"]);

const DEFAULTS: Record<string, unknown> = {
  AUDIT_STYLE: "TREC",
  NULLABLE: true,
  COD_ON_OFF: "",
  REQUIRED: false,
  HISTORY: true,
};

/** NOT NULL columns with a default: a null given for one stores its default. */
const DEFAULTED_WHEN_NULL: ReadonlySet<string> = new Set(["HISTORY"]);

/** Upserts rows by key. Returns how many rows were inserted or actually changed. */
export async function upsertMetadataRows(tx: Queryable, rows: Partial<MetadataRows>): Promise<number> {
  let changed = 0;
  for (const spec of Object.values(METADATA_TABLES)) {
    const list = (rows[spec.table] ?? []) as Array<Record<string, unknown>>;
    if (!list.length) continue;
    const cols = spec.columns.map((c) => `"${c}"`).join(", ");
    const updates = spec.columns
      .filter((c) => !spec.key.includes(c))
      .map((c) => `"${c}" = EXCLUDED."${c}"`)
      .join(", ");
    const distinct = spec.columns
      .filter((c) => !spec.key.includes(c))
      .map((c) => `"${spec.table}"."${c}" IS DISTINCT FROM EXCLUDED."${c}"`)
      .join(" OR ");
    const sql = `INSERT INTO "${spec.table}" (${cols}) VALUES (${spec.columns.map((_, i) => `$${i + 1}`).join(", ")})
      ON CONFLICT (${spec.key.map((k) => `"${k}"`).join(", ")}) DO UPDATE SET ${updates} WHERE ${distinct}`;
    for (const row of list) {
      const values = spec.columns.map((c) => {
        const v =
          row[c] === undefined || (row[c] === null && DEFAULTED_WHEN_NULL.has(c))
            ? (DEFAULTS[c] ?? null)
            : row[c];
        if (!JSON_COLUMNS.has(c) || v === null) return v;
        // JSON text (TB_COST.VALIDATION may be given so; validated as JSON before) is stored as is.
        return typeof v === "string" ? v : JSON.stringify(v);
      });
      const res = await tx.query(sql, values);
      changed += res.rowCount;
    }
  }
  return changed;
}
