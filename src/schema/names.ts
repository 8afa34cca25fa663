// The names the GraphQL schema generates from the metadata (graphql.md: identifiers verbatim).
// Metadata validation refuses a dimension, field or relation whose name would collide with another
// generated name, with a message, rather than have the schema rename anything.
import { AUDIT_FIELDS } from "../metadata/data-types.ts";
import { resolveRelations } from "../metadata/build.ts";
import { parseRowScope } from "../metadata/row-scope.ts";
import type { MetadataRows, Problem } from "../types.ts";

/** Types every schema has, whatever the metadata. */
export const FIXED_TYPE_NAMES: ReadonlySet<string> = new Set([
  "Query",
  "Mutation",
  "Subscription",
  "PageMeta",
  "Media",
  "RecordError",
  "BatchItemResult",
  "BatchResult",
  "BatchMethod",
  "BatchOperation",
  "BatchOperationResult",
  "CascadedChange",
  "AggregateFunction",
  "AggregateInput",
  "AggregatePage",
  "OrderDirection",
  "Int64",
  "Decimal",
  "Date",
  "Timestamp",
  "JSON",
  "String",
  "Int",
  "Float",
  "Boolean",
  "ID",
  "DimensionEvent",
  "HistoryRevision",
  "HistoryPage",
  // The comparison inputs of the filters: one per scalar, and Null_comparison for JSON and MEDIA.
  ...["String", "Int64", "Decimal", "Boolean", "Date", "Timestamp", "Null"].map((s) => `${s}_comparison`),
]);

/** Root fields every schema with a dimension has, whatever the metadata (src/schema/build.ts). */
export const FIXED_ROOT_FIELDS = {
  Query: ["vars", "document", "_empty"],
  Mutation: ["batch"],
  Subscription: [],
} as const satisfies Record<string, readonly string[]>;

/** The root fields the schema makes for one dimension, per root type. */
export function dimensionRootFields(code: string): Record<keyof typeof FIXED_ROOT_FIELDS, string[]> {
  return {
    Query: [code, `${code}_by_id`, `${code}_count`, `${code}_aggregate`, `${code}_history`],
    Mutation: [
      "_create",
      "_update",
      "_patch",
      "_delete",
      "_command",
      "_batch_create",
      "_restore_revision",
    ].map((s) => `${code}${s}`),
    Subscription: [`${code}_events`],
  };
}

/** What the schema appends to a dimension's code for its types and root fields. */
export const GENERATED_SUFFIXES = [
  "_where",
  "_order_by",
  "_page",
  "_create_input",
  "_update_input",
  "_mutation_result",
  "_comparison",
  "_by_id",
  "_count",
  "_aggregate",
  "_create",
  "_update",
  "_patch",
  "_delete",
  "_batch_create",
  "_events",
  "_history",
  "_restore_revision",
] as const;

/** Whether `longer` is `code` with a generated suffix (`SUPP_count` of `SUPP`). */
function suffixed(longer: string, code: string): boolean {
  return GENERATED_SUFFIXES.some((s) => longer === `${code}${s}`);
}

export function graphqlNameProblems(rows: MetadataRows): Problem[] {
  const problems: Problem[] = [];
  const codes = rows.TB_DIM.map((d) => d.COD_DIM);
  // Root fields: a dimension's may not be a built-in one, nor another dimension's.
  const roots = Object.fromEntries(
    Object.entries(FIXED_ROOT_FIELDS).map(([root, names]) => [
      root,
      new Map<string, string | null>(names.map((n) => [n, null])),
    ]),
  ) as Record<keyof typeof FIXED_ROOT_FIELDS, Map<string, string | null>>;
  rows.TB_DIM.forEach((d, i) => {
    const path = `TB_DIM[${i}].COD_DIM`;
    if (FIXED_TYPE_NAMES.has(d.COD_DIM)) {
      problems.push({
        path,
        code: "RESERVED_NAME",
        message: `${d.COD_DIM} is a type of the GraphQL schema; choose another code`,
      });
    }
    for (const [root, names] of Object.entries(dimensionRootFields(d.COD_DIM))) {
      const taken = roots[root as keyof typeof roots];
      for (const name of names) {
        if (!taken.has(name)) {
          taken.set(name, d.COD_DIM);
          continue;
        }
        const owner = taken.get(name);
        if (owner === d.COD_DIM) continue;
        // One code the other's plus a generated suffix: reported once, by the suffix check below.
        if (owner && (suffixed(owner, d.COD_DIM) || suffixed(d.COD_DIM, owner))) continue;
        problems.push(
          owner === null
            ? {
                path,
                code: "RESERVED_NAME",
                message: `${d.COD_DIM} would make the GraphQL ${root} field ${name}, a built-in one; choose another code`,
              }
            : {
                path,
                message: `${d.COD_DIM} would make the GraphQL ${root} field ${name}, which ${owner} makes too; choose another code`,
              },
        );
      }
    }
    for (const other of codes) {
      const suffix = GENERATED_SUFFIXES.find((s) => d.COD_DIM === `${other}${s}`);
      if (other !== d.COD_DIM && suffix) {
        problems.push({
          path,
          message: `${d.COD_DIM} collides with the GraphQL name generated for ${other} (${other}${suffix}); choose another code`,
        });
      }
    }
  });
  // Within a dimension's type: fields, forward relations and reverse relations share one namespace.
  const relations = resolveRelations(rows);
  for (const d of rows.TB_DIM) {
    const taken = new Map<string, string>();
    for (const v of rows.TB_VAR) if (v.COD_DIM === d.COD_DIM) taken.set(v.COD_VAR, "a field");
    const auditStyle = d.AUDIT_STYLE === "CREATED" ? "CREATED" : "TREC";
    for (const a of AUDIT_FIELDS[auditStyle]) taken.set(a.code, "an audit field");
    // The columns ROW_SCOPE adds (CENTRO_DETT, AMBIENTE) are fields of the type too: a relation
    // or child list of that name would replace the field in silence.
    for (const k of parseRowScope(d.ROW_SCOPE, auditStyle))
      if (!taken.has(k.column)) taken.set(k.column, `the row-scope column (ROW_SCOPE ${k.key})`);
    for (const r of relations.filter((r) => r.fromDim === d.COD_DIM)) {
      const seen = taken.get(r.name);
      if (seen && seen !== "a field" && seen !== "an audit field") {
        problems.push({
          path: `TB_OBJECT ${r.fromDim}.${r.fromField}`,
          message: `the relation name ${r.name} is also ${seen} of ${d.COD_DIM}; give it another REL_NAME`,
        });
      }
      taken.set(r.name, `the relation ${r.fromDim}.${r.fromField}`);
    }
    const reverse = relations.filter((r) => r.toDim === d.COD_DIM);
    for (const r of reverse) {
      const siblings = reverse.filter((o) => o.fromDim === r.fromDim).length;
      const name = siblings === 1 ? r.fromDim : `${r.fromDim}_${r.fromField}`;
      const seen = taken.get(name);
      if (seen) {
        problems.push({
          path: `TB_OBJECT ${r.fromDim}.${r.fromField}`,
          message: `${d.COD_DIM}'s list of ${r.fromDim} records would be named ${name}, which is ${seen} of ${d.COD_DIM}`,
        });
      }
      taken.set(name, `the child list ${name}`);
    }
  }
  return problems;
}
