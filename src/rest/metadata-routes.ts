// Metadata reads under /api/v4/core: DIM (the readable dimensions), DIM/{dim},
// VAR?filter[COD_DIM]=, COST?filter[COD_DIM]=.
// Authenticated, and limited like record reads: the source must grant read on the dimension.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { BadRequestError, ValidationError } from "../errors.ts";
import type { QueryParams } from "../query/rest-params.ts";
import {
  createReadContext,
  describeDimension,
  listDimensions,
  listFieldConfigurations,
  listFieldDefinitions,
  type ReadContext,
} from "../resolvers/read/index.ts";
import { contextOf } from "../http/protected.ts";
import type { RouteDeps } from "./deps.ts";

const DIM_FILTER_KEYS = new Set(["filter[COD_DIM]", "filter[COD_DIM][$eq]", "filter[COD_DIM][eq]"]);

/** The dimension named by filter[COD_DIM] (required; no other filter is offered). */
function dimensionFilter(query: QueryParams): string {
  let dim: string | undefined;
  for (const key of Object.keys(query)) {
    if (!key.startsWith("filter")) continue;
    if (!DIM_FILTER_KEYS.has(key)) {
      throw new ValidationError(
        "INVALID_FIELD",
        `Only filter[COD_DIM] is accepted here; got ${key.slice(0, 60)}.`,
        {
          field: key.slice(0, 60),
        },
      );
    }
    const v = query[key];
    if (typeof v === "string" && v.trim() !== "") dim = v.trim();
  }
  if (!dim) {
    throw new BadRequestError("MISSING_PARAMETER", "The query parameter filter[COD_DIM] is required.", {
      field: "filter[COD_DIM]",
    });
  }
  return dim;
}

export const metadataRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services }) => {
  const readContext = (request: FastifyRequest): ReadContext =>
    createReadContext({ db: services.db, metadata: services.metadata }, contextOf(request));

  app.get("/api/v4/core/DIM", async (request, _reply) => {
    const rc = readContext(request);
    return { data: await listDimensions(rc) };
  });

  app.get<{ Params: { dim: string } }>("/api/v4/core/DIM/:dim", async (request, _reply) => {
    const rc = readContext(request);
    return { data: await describeDimension(rc, request.params.dim) };
  });

  app.get("/api/v4/core/VAR", async (request, _reply) => {
    const rc = readContext(request);
    return { data: await listFieldDefinitions(rc, dimensionFilter(request.query as QueryParams)) };
  });

  app.get("/api/v4/core/COST", async (request, _reply) => {
    const rc = readContext(request);
    return { data: await listFieldConfigurations(rc, dimensionFilter(request.query as QueryParams)) };
  });
};
