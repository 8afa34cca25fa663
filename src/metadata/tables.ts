// The metadata tables: their keys, columns and row schema (the fixture format's, so a metadata
// write accepts exactly what a fixture does). One description for reading, upserting, merging and
// the REST metadata endpoints (/api/v4/core/{code}).
import type { z } from "zod";
import { fixtureSchema } from "../fixtures/schema.ts";
import type { MetadataCode, MetadataRows } from "../types.ts";

export interface MetadataTable {
  code: MetadataCode;
  table: keyof MetadataRows;
  /** Key columns, in path order: PUT /api/v4/core/VAR/{COD_DIM}/{COD_VAR}. */
  key: readonly string[];
  /** Key columns holding integers (parsed from the path). */
  integerKeys: readonly string[];
  /** Columns, the key included. */
  columns: readonly string[];
  schema: z.ZodObject;
}

const shape = fixtureSchema.shape;

function table(
  code: MetadataCode,
  name: keyof MetadataRows,
  key: string[],
  schema: z.ZodObject,
  integerKeys: string[] = [],
): MetadataTable {
  return { code, table: name, key, integerKeys, columns: Object.keys(schema.shape), schema };
}

export const METADATA_TABLES: Readonly<Record<MetadataCode, MetadataTable>> = {
  DIM: table("DIM", "TB_DIM", ["COD_DIM"], shape.TB_DIM.element),
  VAR: table("VAR", "TB_VAR", ["COD_DIM", "COD_VAR"], shape.TB_VAR.element),
  COST: table("COST", "TB_COST", ["COD_DIM", "NUM_COST"], shape.TB_COST.unwrap().element, ["NUM_COST"]),
  OBJECT: table("OBJECT", "TB_OBJECT", ["COD_DIM", "COD_VAR"], shape.TB_OBJECT.unwrap().element),
  MENU: table("MENU", "TB_MENU", ["COD_MENU"], shape.TB_MENU.unwrap().element),
  SORT: table("SORT", "TB_SORT", ["COD_DIM", "SORT_KEY"], shape.TB_SORT.unwrap().element),
  DOCUMENT: table("DOCUMENT", "TB_DOCUMENT", ["DOC_NAME"], shape.TB_DOCUMENT.unwrap().element),
};

export function keyOf(t: MetadataTable, row: Record<string, unknown>): string {
  return t.key.map((k) => String(row[k])).join("/");
}
