// Reads every metadata row on the write transaction's connection (Prisma cannot join it).
import { ident } from "../../db/sql.ts";
import type { MetadataRows, Queryable } from "../../types.ts";
import { METADATA_TABLES } from "./tables.ts";

export async function readMetadataRowsInTransaction(tx: Queryable): Promise<MetadataRows> {
  const out: Partial<Record<keyof MetadataRows, unknown[]>> = {};
  for (const t of Object.values(METADATA_TABLES)) {
    const res = await tx.query(
      `SELECT ${t.columns.map(ident).join(", ")} FROM ${ident(t.table)} ORDER BY ${t.key.map(ident).join(", ")}`,
    );
    out[t.table] = res.rows;
  }
  return out as MetadataRows;
}
