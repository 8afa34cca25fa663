// What the read resolvers return: plain data for any adapter, with a description of the records'
// shape (fields and embedded relations) from which an adapter can build a serializer or a type.
import type { AggregateFunction, PlannedFilter } from "../../query/types.ts";
import type { DataType, FieldDef } from "../../types.ts";
import type { DataRecord, DebugInfo } from "./common.ts";

export interface RecordShape {
  readonly dim: string;
  /** The record's fields in order. */
  readonly fields: readonly FieldDef[];
  readonly expand: ReadonlyArray<{
    readonly name: string;
    /** Reverse relations embed an array, forward relations one record or null. */
    readonly many: boolean;
    readonly shape: RecordShape;
  }>;
}

export interface GroupShape {
  readonly dim: string;
  readonly groupBy: readonly FieldDef[];
  readonly aggregates: ReadonlyArray<{
    readonly alias: string;
    readonly fn: AggregateFunction;
    readonly field: FieldDef | null;
  }>;
}

export interface ListMeta {
  /** Matching records; null when the query asked for no total (ListQuery.withTotal false). */
  total: number | null;
  /** The page size asked for ($num_rows). */
  num_rows: number;
  offset: number;
  has_more: boolean;
  /** Present (true) when `total` is the planner's estimate (decisions §11). */
  total_estimated?: true;
}

export type ListResult =
  | {
      kind: "records";
      data: DataRecord[];
      meta: ListMeta;
      shape: RecordShape;
      debug?: DebugInfo;
      /**
       * The sort keys' values of the page's last row (one per planned sort key, the id last), as
       * read; null for an empty page. What a GraphQL end_cursor encodes (decisions §21).
       */
      endKey?: readonly unknown[] | null;
    }
  | {
      kind: "groups";
      data: DataRecord[];
      meta: ListMeta;
      shape: GroupShape;
      debug?: DebugInfo;
      /**
       * The sort keys' values of the page's last group (every group field among them), when asked
       * for (ListQuery.endKey) or on a cursor page; null for an empty page. What a GraphQL
       * `D_aggregate` end_cursor encodes (decisions §21).
       */
      endKey?: readonly unknown[] | null;
    };

export interface RecordResult {
  data: DataRecord;
  shape: RecordShape;
  debug?: DebugInfo;
}

export interface CountResult {
  count: number;
  dimension: string;
  /** The conditions applied, the TREC rule included (null: none). */
  filter: PlannedFilter | null;
  debug?: DebugInfo;
}

/** An item of GET /{dim}/fields (spec 2.4), in the caller's context (center_dett, peso). */
export interface FieldDescription {
  cod_var: string;
  desc_var: string | null;
  data_type: DataType;
  length: number | null;
  cod_on_off: string;
  required: boolean;
  render_hint: string | null;
  group_name: string | null;
  nullable: boolean;
  tipo_campo: string | null;
  tipo_var: string | null;
}

export interface DimensionDescription {
  COD_DIM: string;
  DESC_DIM: string | null;
  TABLE_NAME: string;
  ID_FIELD: string;
  CASCADE_DELETE: string | null;
}

/** A TB_VAR row (GET /VAR). */
export interface FieldDefinitionRow {
  COD_DIM: string;
  NUM_VAR: number;
  COD_VAR: string;
  DESC_VAR: string | null;
  DATA_TYPE: string;
  LENGTH: number | null;
  DECIMALS: number;
  NULLABLE: boolean;
  TIPO_CAMPO: string | null;
  TIPO_VAR: string | null;
}

/** A TB_COST row (GET /COST). */
export interface FieldConfigurationRow {
  COD_DIM: string;
  NUM_COST: number;
  COD_VAR: string;
  COD_ON_OFF: string;
  REQUIRED: boolean;
  RENDER_HINT: string | null;
  GROUP_NAME: string | null;
  VALUE_TEMP: string | null;
  COD_UTENTE: number | null;
  /** The value rules (issue 39 §3) as stored; null: none. */
  VALIDATION: unknown;
  CENTER_DETT: string | null;
}
