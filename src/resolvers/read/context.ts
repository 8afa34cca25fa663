// The context every read resolver takes: the caller (user, tenant, source, center_dett, clock), the
// database, the metadata snapshot the request is answered from, and the request's loaders. REST
// routes and GraphQL build one per request with createReadContext.
import { type AccessView, accessView } from "../../auth/access-view.ts";
import { createRelationLoaders, type RelationLoaders } from "../../loaders/relation-loaders.ts";
import type { MetadataModel, Queryable, RequestContext } from "../../types.ts";
import { NO_TOTALS_CACHE, type TotalsCache } from "./totals-cache.ts";

export interface ReadContext {
  readonly request: RequestContext;
  readonly db: Queryable;
  /** One metadata version for the whole request. */
  readonly model: MetadataModel;
  /** What the caller may read under `model` (grants, peso, center_dett, source): decided once. */
  readonly view: AccessView;
  readonly loaders: RelationLoaders;
  /** meta.total is counted exactly up to this many matches, estimated beyond (decisions §11). */
  readonly countBound: number;
  /** Totals counted earlier, until a write commits (src/resolvers/read/totals-cache.ts). */
  readonly totals: TotalsCache;
}

export interface ReadDeps {
  db: Queryable;
  metadata: { current(): MetadataModel };
  /** COUNT_EXACT_LIMIT (default 10,000). */
  countBound?: number;
  /** The process's totals cache; none: every total is counted. */
  totals?: TotalsCache;
}

export const DEFAULT_COUNT_BOUND = 10_000;

export function createReadContext(deps: ReadDeps, request: RequestContext): ReadContext {
  const model = deps.metadata.current();
  return {
    request,
    db: deps.db,
    model,
    view: accessView(request, model),
    loaders: createRelationLoaders(deps.db, request.principal.tenantId, model.version),
    countBound: deps.countBound ?? DEFAULT_COUNT_BOUND,
    totals: deps.totals ?? NO_TOTALS_CACHE,
  };
}
