// REST read endpoints of spec 4.2 under /api/v4/core. Each route authenticates, turns the query
// string into the query model, calls a read resolver and serialises its result; nothing else.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import {
  type FieldNamed,
  parseCountParams,
  parseListParams,
  parseLookupParams,
  parseHistoryParams,
  parseNamedSortParams,
  parseRecordParams,
  type QueryParams,
} from "../query/rest-params.ts";
import { parseSortExpression } from "../query/sort-syntax.ts";
import type { ListQuery } from "../query/types.ts";
import {
  countRecords,
  createReadContext,
  describeFields,
  getRecord,
  listRecords,
  listRecordsBySort,
  type ReadContext,
} from "../resolvers/read/index.ts";
import { lookupPage } from "../resolvers/read/lookup.ts";
import { listHistory } from "../resolvers/read/history.ts";
import { httpLaneClient } from "../http/heavy-requests.ts";
import { contextOf } from "../http/protected.ts";
import type { RouteDeps } from "./deps.ts";
import { describeFilter } from "./filters-applied.ts";
import { estimateListValues } from "./read-estimate.ts";
import { createReadSerializers } from "./response/serializers.ts";

type DimParams = { Params: { dim: string } };

/** GET /vars's paging headers (exposed to browsers by the CORS setup, src/http/server.ts). */
const LOOKUP_HAS_MORE_HEADER = "X-Has-More";
const LOOKUP_NEXT_OFFSET_HEADER = "X-Next-Offset";

/** The body to return from the handler, its media type set (docs/decisions.md, "Handlers return their body"). */
function jsonBody(reply: FastifyReply, body: string): string {
  reply.type("application/json; charset=utf-8");
  return body;
}

export const readRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services, heavy, readGate }) => {
  const serializers = createReadSerializers();
  // Every statement of a read passes its caller's tenant's gate (src/ratelimit/tenant-gate.ts):
  // one tenant's many requests cannot hold the database against another's.
  const readContext = (request: FastifyRequest): ReadContext => {
    const caller = contextOf(request);
    const tenant = services.forTenant(caller.principal.tenantId);
    return createReadContext(
      {
        db: readGate.queryable(tenant.readDb, caller.principal.tenantId),
        metadata: services.metadata,
        countBound: services.config.countExactLimit,
        totals: tenant.totals,
      },
      caller,
    );
  };
  /** What the heavy-request lanes weigh a list at (src/rest/read-estimate.ts). */
  const listValues = (rc: ReadContext, dimCode: string, q: ListQuery): number =>
    estimateListValues(q, rc.model.dimensions.get(dimCode), services.config.countExactLimit);
  const query = (request: FastifyRequest) => request.query as QueryParams;
  /**
   * Whether a name is a field of `dimCode` the caller may know of (read through the source, not
   * hidden by peso): an unknown parameter so named is answered with the filter's form
   * (`?CITY=Rome` for filter[CITY]=Rome). The parameters are read before the grant is checked.
   */
  const fieldOf =
    (rc: ReadContext, dimCode: string): FieldNamed =>
    (name) => {
      const dim = rc.model.dimensions.get(dimCode);
      return (
        dim !== undefined &&
        rc.view.may(dimCode, "read") &&
        rc.view.fields(dim).visibleField(name) !== undefined
      );
    };
  /** A list page of `values`, read in its tenant's heavy lane when heavy, as the list's body. */
  const listInLane = (
    rc: ReadContext,
    reply: FastifyReply,
    values: number,
    list: () => Promise<Parameters<typeof serializers.list>[1]>,
  ) =>
    heavy.run(
      rc.request.principal.tenantId,
      values,
      () => httpLaneClient(reply.raw),
      async () => jsonBody(reply, serializers.list(rc.model.version, await list())),
    );

  // Foreign-key lookups (spec 4.4): a bare array of {key field, display field}, at most 1000 per
  // request. The array stays bare (spec 4.4's shape, what clients parse); whether it was cut is
  // said in headers: X-Has-More (true or false, always) and, when true, X-Next-Offset, the
  // $offset of the next page (docs/decisions.md, "Lookups are paged, never cut silently").
  app.get("/api/v4/core/vars", async (request, reply) => {
    const page = await lookupPage(readContext(request), parseLookupParams(query(request)));
    reply.header(LOOKUP_HAS_MORE_HEADER, String(page.hasMore));
    if (page.nextOffset !== null) reply.header(LOOKUP_NEXT_OFFSET_HEADER, String(page.nextOffset));
    return page.items;
  });

  app.get<DimParams>("/api/v4/core/:dim", async (request, reply) => {
    const rc = readContext(request);
    const params = parseListParams(query(request), fieldOf(rc, request.params.dim));
    return listInLane(rc, reply, listValues(rc, request.params.dim, params), () =>
      listRecords(rc, request.params.dim, params),
    );
  });

  app.get<DimParams>("/api/v4/core/:dim/count", async (request, _reply) => {
    const rc = readContext(request);
    const { count, dimension, filter, debug } = await countRecords(
      rc,
      request.params.dim,
      parseCountParams(query(request), fieldOf(rc, request.params.dim)),
    );
    return { count, dimension, filters_applied: describeFilter(filter), ...(debug ? { debug } : {}) };
  });

  app.get<DimParams>("/api/v4/core/:dim/fields", async (request, _reply) => {
    const rc = readContext(request);
    return { data: await describeFields(rc, request.params.dim) };
  });

  app.get<{ Params: { dim: string; sortKey: string } }>(
    "/api/v4/core/:dim/sort/:sortKey",
    async (request, reply) => {
      const rc = readContext(request);
      // Every list parameter but sort / $order: the named sort gives the order.
      const params = parseNamedSortParams(query(request), fieldOf(rc, request.params.dim));
      // Weighed in the named sort's order (an unknown sort is the resolver's 404).
      const named = rc.model.dimensions.get(request.params.dim)?.sorts.get(request.params.sortKey);
      const ordered = named ? { ...params, sort: parseSortExpression(named.expr) } : params;
      return listInLane(rc, reply, listValues(rc, request.params.dim, ordered), () =>
        listRecordsBySort(rc, request.params.dim, request.params.sortKey, params),
      );
    },
  );

  // A record's revisions, newest first (decisions.md §19).
  app.get<{ Params: { dim: string; id: string } }>("/api/v4/core/:dim/:id/history", async (request) => {
    const rc = readContext(request);
    return listHistory(rc, request.params.dim, request.params.id, parseHistoryParams(query(request)));
  });

  app.get<{ Params: { dim: string; id: string } }>("/api/v4/core/:dim/:id", async (request, reply) => {
    const rc = readContext(request);
    const result = await getRecord(
      rc,
      request.params.dim,
      request.params.id,
      parseRecordParams(query(request)),
    );
    return jsonBody(reply, serializers.record(rc.model.version, result));
  });
};
