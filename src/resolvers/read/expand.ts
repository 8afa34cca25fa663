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
