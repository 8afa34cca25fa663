// Documents (spec 4.6, decisions.md §14): GET /api/v4/document/{name}/{key} from TB_DOCUMENT with
// its query parameters, POST /api/v4/document on the fly. The read resolvers do the work.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { BadRequestError } from "../errors.ts";
import { contextOf } from "../http/protected.ts";
import { CONTEXT_PARAMETERS } from "../query/rest-params.ts";
import type { ReadDeps } from "../resolvers/read/context.ts";
import { getDocument, getOnTheFlyDocument } from "../resolvers/read/documents.ts";
import type { RequestContext } from "../types.ts";
import type { RouteDeps } from "./deps.ts";

function flag(value: unknown, name: string): boolean {
  if (value === undefined || value === "false" || value === "0") return false;
  if (value === "true" || value === "1" || value === "") return true;
  throw new BadRequestError("INVALID_PARAMETER", `${name} must be true or false.`, { field: name });
}

export const documentRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services, readGate }) => {
  // A document's statements pass its caller's tenant's read gate (src/ratelimit/tenant-gate.ts).
  const depsOf = (caller: RequestContext): ReadDeps => {
    const tenant = services.forTenant(caller.principal.tenantId);
    return {
      db: readGate.queryable(tenant.readDb, caller.principal.tenantId),
      metadata: services.metadata,
      countBound: services.config.countExactLimit,
      totals: tenant.totals,
    };
  };

  app.get<{ Params: { name: string; key: string } }>("/api/v4/document/:name/:key", async (request) => {
    const query = request.query as Record<string, unknown>;
    const params: Record<string, string> = {};
    for (const [k, v] of Object.entries(query)) {
      if (typeof v === "string") {
        // The document's own parameters; the context and `compact` are read apart.
        if (!CONTEXT_PARAMETERS.has(k) && k !== "compact") params[k] = v;
      } else if (v !== undefined) {
        throw new BadRequestError("INVALID_PARAMETER", `${k.slice(0, 60)} is given more than once.`, {
          field: k.slice(0, 60),
        });
      }
    }
    const caller = contextOf(request);
    return getDocument(
      depsOf(caller),
      caller,
      request.params.name,
      request.params.key,
      params,
      flag(query.compact, "compact"),
    );
  });

  app.post("/api/v4/document", async (request: FastifyRequest) => {
    const caller = contextOf(request);
    return getOnTheFlyDocument(depsOf(caller), caller, request.body);
  });
};
