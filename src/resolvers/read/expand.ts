// Embedding related records ($expand): every parent's key goes to the request's loader in the same
// tick, so each relation costs one query however many rows the page has.
import { embeddedColumn, joinsInPage } from "../../query/compile.ts";
import { planExpand } from "../../query/plan.ts";
import type { ExpandPlan } from "../../query/types.ts";
import { type DataRecord, requireDimension, toRecord } from "./common.ts";
import type { ReadContext } from "./context.ts";
import type { RecordShape } from "./types.ts";

async function related(rc: ReadContext, e: ExpandPlan, key: unknown): Promise<DataRecord[]> {
  if (key === null || key === undefined) return [];
  const rows = await rc.loaders.load(e, key as string | number);
  return rows.map((row) => toRecord(row, e.columns));
}

function embed(e: ExpandPlan, records: DataRecord[]): DataRecord | DataRecord[] | null {
  return e.direction === "reverse" ? records : (records[0] ?? null);
}

/**
 * Reads the record of relation `index` that the page's statement embedded in a row (or null): the
 * relation's fields, straight from the row's columns into one record per row.
 */
function embeddedReader(e: ExpandPlan, index: number): (row: Record<string, unknown>) => DataRecord | null {
  const key = embeddedColumn(index, e.targetKey.code);
  const columns = e.columns.map((f) => [f.code, embeddedColumn(index, f.code)] as const);
  return (row) => {
    if (row[key] == null) return null;
    const out: DataRecord = {};
    for (const [code, column] of columns) {
      const v = row[column];
      out[code] = v === undefined ? null : v;
    }
    return out;
  };
}

/**
 * Adds each expanded relation to each record; `rows` are the records' table rows (keys included).
 * With `joined`, the rows come from a page statement that embedded its forward relations
 * (compileRecordsPage / compileRecordsSelect with embed): those are read from the rows at once.
 * The others go through the loaders: the promise of those, or null when there are none (then
 * every relation is attached on return and the caller has nothing to await).
 */
export function attachExpansions(
  rc: ReadContext,
  expand: readonly ExpandPlan[],
  rows: ReadonlyArray<Record<string, unknown>>,
  records: DataRecord[],
  opts: { joined?: boolean } = {},
): Promise<void> | null {
  const loading: Promise<void>[] = [];
  expand.forEach((e, index) => {
    if (opts.joined && joinsInPage(e)) {
      const read = embeddedReader(e, index);
      rows.forEach((row, i) => {
        records[i]![e.name] = read(row);
      });
      return;
    }
    loading.push(
      Promise.all(rows.map((row) => related(rc, e, row[e.parentKey.code]))).then((values) => {
        values.forEach((list, i) => {
          records[i]![e.name] = embed(e, list);
        });
      }),
    );
  });
  return loading.length ? Promise.all(loading).then(() => undefined) : null;
}

export function expandShapes(expand: readonly ExpandPlan[]): RecordShape["expand"] {
  return expand.map((e) => ({
    name: e.name,
    many: e.direction === "reverse",
    shape: { dim: e.target.code, fields: e.columns, expand: [] },
  }));
}

/** A relation planned once for every record of its level, and what is planned under it. */
export interface RelationTree {
  readonly plan: ExpandPlan;
  readonly children: readonly RelationTree[];
}

/** A relation already embedded in a level's records (by name), with the levels to load under it. */
export interface EmbeddedRelation {
  readonly name: string;
  readonly children: readonly RelationTree[];
}

/**
 * Loads the levels under `trees` into `records`, whose own relations (the trees' plans) are
 * already embedded: for each level, each relation is one batched statement for every record of
 * that level (the request's loaders). A record whose key of a relation is not visible is left
 * without it (its field resolver reports the field).
 */
export async function attachRelationTree(
  rc: ReadContext,
  trees: readonly EmbeddedRelation[],
  records: readonly DataRecord[],
): Promise<void> {
  await Promise.all(
    trees.map(async (t) => {
      if (!t.children.length) return;
      const level: DataRecord[] = [];
      for (const r of records) {
        const v = r[t.name];
        if (Array.isArray(v)) level.push(...(v as DataRecord[]));
        else if (v !== null && typeof v === "object") level.push(v as DataRecord);
      }
      if (!level.length) return;
      await Promise.all(
        t.children.map(async (c) => {
          const key = c.plan.parentKey.code;
          const holders = level.filter((r) => key in r);
          const values = await Promise.all(holders.map((r) => related(rc, c.plan, r[key])));
          values.forEach((list, i) => {
            holders[i]![c.plan.name] = embed(c.plan, list);
          });
        }),
      );
      await attachRelationTree(
        rc,
        t.children.map((c) => ({ name: c.plan.name, children: c.children })),
        level,
      );
    }),
  );
}

/** One relation of one parent through a plan made before (GraphQL: once per request). */
export async function loadPlannedRelation(
  rc: ReadContext,
  e: ExpandPlan,
  parentKey: unknown,
): Promise<DataRecord | DataRecord[] | null> {
  return embed(e, await related(rc, e, parentKey));
}

/**
 * One relation of one parent, for GraphQL field resolvers: `parentKey` is the parent's value of the
 * relation's key (the foreign key for a forward relation, the referenced key for a reverse one).
 * Calls made in the same tick share one query.
 */
export async function loadRelated(
  rc: ReadContext,
  dimCode: string,
  relationName: string,
  parentKey: unknown,
): Promise<DataRecord | DataRecord[] | null> {
  const dim = requireDimension(rc, dimCode);
  const [e] = planExpand(rc.request, rc.model, dim, [relationName]);
  return embed(e!, await related(rc, e!, parentKey));
}
