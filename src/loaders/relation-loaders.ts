// Per-request DataLoaders for embedded relations: every key asked for in the same tick (all rows of
// a page, or every GraphQL parent of a field) is loaded with one query per relation and field set,
// a reverse relation's at most its plan's limit per key.
import DataLoader from "dataloader";
import { compileRelationBatch } from "../query/compile.ts";
import type { ExpandPlan } from "../query/types.ts";
import type { Queryable } from "../types.ts";

export type Row = Record<string, unknown>;

export interface RelationLoaders {
  /**
   * The target rows whose key equals `key` (ordered by the target's id), at most `expand.limit`
   * of them; [] when none.
   */
  load(expand: ExpandPlan, key: string | number): Promise<Row[]>;
}

function loaderKey(e: ExpandPlan): string {
  return `${e.target.code}.${e.targetKey.code}|${e.limit}|${e.columns.map((f) => f.code).join(",")}`;
}

/** `prepare`: the statement namespace (the metadata version), see QueryOptions. */
export function createRelationLoaders(
  db: Queryable,
  tenantId: string,
  prepare?: string | number,
): RelationLoaders {
  type Loader = DataLoader<string | number, Row[], string>;
  // By relation and fields, then by the caller's row scope on the target (one per source the
  // target is read through): rows one scope lets through are never served to another.
  const loaders = new Map<string, Map<object | null, Loader>>();

  function loaderFor(e: ExpandPlan): Loader {
    const key = loaderKey(e);
    let byScope = loaders.get(key);
    if (!byScope) {
      byScope = new Map();
      loaders.set(key, byScope);
    }
    let loader = byScope.get(e.rowScope);
    if (!loader) {
      loader = new DataLoader<string | number, Row[], string>(
        async (keys) => {
          const q = compileRelationBatch(e, tenantId, keys);
          const { rows } = await db.query<Row>(
            q.text,
            q.params,
            prepare === undefined ? undefined : { prepare, plan: q.plan },
          );
          const byKey = new Map<string, Row[]>();
          for (const row of rows) {
            const k = String(row[e.targetKey.code]);
            const list = byKey.get(k);
            if (list) list.push(row);
            else byKey.set(k, [row]);
          }
          return keys.map((k) => byKey.get(String(k)) ?? []);
        },
        { cacheKeyFn: (k) => String(k), maxBatchSize: 5000 },
      );
      byScope.set(e.rowScope, loader);
    }
    return loader;
  }

  return {
    load(expand, key) {
      return loaderFor(expand).load(key);
    },
  };
}
