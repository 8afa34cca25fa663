// Reads and writes the metadata tables. Reads go through Prisma; writes run inside the caller's
// transaction (Queryable) so that metadata, table DDL and the version bump commit together.
import type { PrismaClient } from "../db/prisma.ts";
import type { MetadataRows, Queryable } from "../types.ts";

export const METADATA_CHANNEL = "dimensio_metadata";

export async function readMetadataRows(prisma: PrismaClient): Promise<MetadataRows> {
  const [TB_DIM, TB_VAR, TB_COST, TB_OBJECT, TB_MENU, TB_SORT, TB_DOCUMENT] = await Promise.all([
    prisma.tbDim.findMany({ orderBy: { COD_DIM: "asc" } }),
    prisma.tbVar.findMany({ orderBy: [{ COD_DIM: "asc" }, { NUM_VAR: "asc" }] }),
    prisma.tbCost.findMany({ orderBy: [{ COD_DIM: "asc" }, { NUM_COST: "asc" }] }),
    prisma.tbObject.findMany({ orderBy: [{ COD_DIM: "asc" }, { COD_VAR: "asc" }] }),
    prisma.tbMenu.findMany({ orderBy: { NLEFT: "asc" } }),
    prisma.tbSort.findMany({ orderBy: [{ COD_DIM: "asc" }, { SORT_KEY: "asc" }] }),
    prisma.tbDocument.findMany({ orderBy: { DOC_NAME: "asc" } }),
  ]);
  return { TB_DIM, TB_VAR, TB_COST, TB_OBJECT, TB_MENU, TB_SORT, TB_DOCUMENT };
}

export async function readMetadataVersion(prisma: PrismaClient): Promise<number> {
  const row = await prisma.tbMetaState.findUnique({ where: { ID: 1 } });
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

type TableSpec = { table: keyof MetadataRows; key: string[]; columns: string[]; json?: string[] };

const TABLES: TableSpec[] = [
  {
    table: "TB_DIM",
    key: ["COD_DIM"],
    columns: [
      "COD_DIM",
      "DESC_DIM",
      "TABLE_NAME",
      "ID_FIELD",
      "CASCADE_DELETE",
      "INSERT_CASCADE",
      "UPDATE_CASCADE",
      "AUDIT_STYLE",
    ],
  },
  {
    table: "TB_VAR",
    key: ["COD_DIM", "COD_VAR"],
    columns: [
      "COD_DIM",
      "COD_VAR",
      "NUM_VAR",
      "DESC_VAR",
      "DATA_TYPE",
      "LENGTH",
      "DECIMALS",
      "NULLABLE",
      "TIPO_CAMPO",
      "TIPO_VAR",
    ],
  },
  {
    table: "TB_COST",
    key: ["COD_DIM", "NUM_COST"],
    columns: [
      "COD_DIM",
      "NUM_COST",
      "COD_VAR",
      "COD_ON_OFF",
      "REQUIRED",
      "RENDER_HINT",
      "GROUP_NAME",
      "VALUE_TEMP",
      "COD_UTENTE",
      "CENTER_DETT",
    ],
  },
  {
    table: "TB_OBJECT",
    key: ["COD_DIM", "COD_VAR"],
    columns: ["COD_DIM", "COD_VAR", "COD_DIM_OBJ", "COD_VAR_OBJ", "REL_NAME", "COD_VAR_DESC"],
  },
  { table: "TB_MENU", key: ["COD_MENU"], columns: ["COD_MENU", "NLEFT", "NRIGHT", "DESC_MENU", "COD_DIM"] },
  {
    table: "TB_SORT",
    key: ["COD_DIM", "SORT_KEY"],
    columns: ["COD_DIM", "SORT_KEY", "DESC_SORT", "SORT_EXPR"],
  },
  {
    table: "TB_DOCUMENT",
    key: ["DOC_NAME"],
    columns: ["DOC_NAME", "COD_DIM", "DEFINITION"],
    json: ["DEFINITION"],
  },
];

const DEFAULTS: Record<string, unknown> = {
  AUDIT_STYLE: "TREC",
  NULLABLE: true,
  COD_ON_OFF: "",
  REQUIRED: false,
};

/** Upserts rows by key. Returns how many rows were inserted or actually changed. */
export async function upsertMetadataRows(tx: Queryable, rows: Partial<MetadataRows>): Promise<number> {
  let changed = 0;
  for (const spec of TABLES) {
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
        const v = row[c] === undefined ? (DEFAULTS[c] ?? null) : row[c];
        return spec.json?.includes(c) && v !== null ? JSON.stringify(v) : v;
      });
      const res = await tx.query(sql, values);
      changed += res.rowCount;
    }
  }
  return changed;
}
