// lookupValues: GET /api/v4/core/vars (spec 4.4, decisions.md §12). The values an AC or VARS field
// of the source's dimension may take: the destination's key and display field, ordered by the
// display field (then the key), the caller's tenant only, cancelled records left out, at most 1000
// per request. The read grant on the source is what is checked (a lookup needs no grant on the
// destination's node); only the key and display fields are read, and only those the caller's peso
// may see. A longer list is paged ($num_rows, $offset): the answer says whether more follows, so
// that the bound never cuts a list unnoticed (a select list missed the suppliers past the 1000th).
import { authorizeRead } from "../../auth/authorize.ts";
import { BadRequestError, ValidationError } from "../../errors.ts";
import { compileRecordsSelect } from "../../query/compile.ts";
import { invalidFilter } from "../../query/errors.ts";
import { checkFilterLimits, planFilterExpr, relatedRowScope } from "../../query/plan.ts";
import { type FilterExpr, MAX_NUM_ROWS, type PlannedFilter, type RecordsPlan } from "../../query/types.ts";
import type { FieldDef } from "../../types.ts";
import { runQuery } from "./common.ts";
import type { ReadContext } from "./context.ts";

/** The most values one lookup answers: a list page's bound (spec 4.2 $num_rows, decisions §12). */
export const MAX_LOOKUP_ITEMS = MAX_NUM_ROWS;
const LOOKUP_OPERATORS = new Set(["eq", "startswith", "endswith", "contains"]);

export interface LookupQuery {
  /** The AC or VARS field of the source's dimension. */
  field: string;
  /** `$filter` over the key and display fields (startwith, endwith, contains, equals, and, or). */
  filter: FilterExpr | null;
  /** getACList=1: an AC field lists everything, like VARS. */
  fullList: boolean;
  /** The page's size, at most MAX_LOOKUP_ITEMS (the default). */
  limit?: number;
  /** The values skipped, in the lookup's order (display field, then key). */
  offset?: number;
}

/** One page of a lookup: its values, and the offset of the next page when there is one. */
export interface LookupPage {
  items: Record<string, unknown>[];
  /** The page asked for (its offset, its size). */
  offset: number;
  limit: number;
  /** More values follow this page: ask again with $offset = nextOffset. */
  hasMore: boolean;
  nextOffset: number | null;
}

/** A lookup's filter: only its key and display fields, text operators, and no NOT. */
function planLookupFilter(expr: FilterExpr, allowed: ReadonlyMap<string, FieldDef>): PlannedFilter {
  return planFilterExpr(expr, {
    field(condition) {
      const field = allowed.get(condition.field);
      if (!field) {
        throw invalidFilter(
          `A lookup filters only its key and display fields (${[...allowed.keys()].join(", ")}); got ${condition.field.slice(0, 60)}.`,
          condition.origin,
        );
      }
      if (!LOOKUP_OPERATORS.has(condition.op)) {
        throw invalidFilter(
          `A lookup filter uses startwith, endwith, contains or equals; got ${condition.op}.`,
          condition.origin,
        );
      }
      return field;
    },
    refuseNot() {
      throw invalidFilter("A lookup filter combines conditions with and and or only.", "$filter");
    },
  });
}

/** The values of a lookup's page (GraphQL `vars`: the first MAX_LOOKUP_ITEMS unless paged). */
export async function lookupValues(rc: ReadContext, query: LookupQuery): Promise<Record<string, unknown>[]> {
  return (await lookupPage(rc, query)).items;
}

export async function lookupPage(rc: ReadContext, query: LookupQuery): Promise<LookupPage> {
  const limit = Math.min(query.limit ?? MAX_LOOKUP_ITEMS, MAX_LOOKUP_ITEMS);
  const offset = query.offset ?? 0;
  const none: LookupPage = { items: [], offset, limit, hasMore: false, nextOffset: null };
  const ctx = rc.request;
  const node = ctx.source ? rc.model.menuByCode.get(ctx.source) : undefined;
  // No source, or one that is not a security area: the grant check says which (400, 403).
  if (!node) rc.view.require(null, "read");
  if (!node?.dim) {
    throw new BadRequestError(
      "INVALID_PARAMETER",
      `Source ${ctx.source} is a grouping node; name the node that serves the dimension of the field.`,
      { field: "source" },
    );
  }
  const dim = authorizeRead(ctx, rc.model, node.dim, rc.view);
  const field = dim.rules.visibleField(query.field);
  if (!field) {
    throw new ValidationError("INVALID_FIELD", `${dim.code} has no field ${query.field.slice(0, 60)}.`, {
      field: query.field.slice(0, 60),
    });
  }
  const relation = dim.relations.find((r) => r.fromField === field.code);
  if (!field.fkKind || !relation) {
    throw new ValidationError(
      "INVALID_FIELD_TYPE",
      `${dim.code}.${field.code} is not a lookup field (AC or VARS).`,
      { field: field.code },
    );
  }
  if (field.fkKind === "AC" && !query.filter && !query.fullList) return none;

  const target = rc.model.dimensions.get(relation.toDim)!;
  const key = target.fieldsByCode.get(relation.toField);
  const display = relation.descField ? target.fieldsByCode.get(relation.descField) : undefined;
  const targetRules = rc.view.fields(target);
  const columns = [key, display].filter((f): f is FieldDef => f !== undefined && targetRules.isVisible(f));
  if (!columns.length) return none;
  const allowed = new Map(columns.map((f) => [f.code, f]));
  const items: PlannedFilter[] = [];
  if (target.fieldsByCode.has("TREC")) items.push({ kind: "live" });
  if (query.filter) items.push(planLookupFilter(checkFilterLimits(query.filter), allowed));
  const plan: RecordsPlan = {
    kind: "records",
    dim: target,
    tenantId: ctx.principal.tenantId,
    where: items.length === 0 ? null : items.length === 1 ? items[0]! : { kind: "and", items },
    // Only the targets the caller's scope lets it see are offered (decisions.md §17).
    rowScope: relatedRowScope(ctx, rc.model, target, rc.view.sourceFor(target.code, "read") ?? ctx.source),
    columns,
    selected: columns,
    sort: [...columns].reverse().map((f) => ({ field: f, direction: "asc" as const })),
    // One row past the page tells whether more follow, without counting the whole list.
    limit: limit + 1,
    offset,
    expand: [],
  };
  const rows = await runQuery<Record<string, unknown>>(rc, compileRecordsSelect(plan, true));
  const hasMore = rows.length > limit;
  return {
    items: rows.slice(0, limit).map((row) => Object.fromEntries(columns.map((f) => [f.code, row[f.code]]))),
    offset,
    limit,
    hasMore,
    nextOffset: hasMore ? offset + limit : null,
  };
}
