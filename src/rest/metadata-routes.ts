// Metadata reads under /api/v4/core: DIM/{dim} (and, with the reads issue, VAR and COST).
import type { FastifyPluginAsync } from "fastify";
import { NotFoundError } from "../errors.ts";
import type { RouteDeps } from "./deps.ts";

export const metadataRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services }) => {
  app.get<{ Params: { dim: string } }>("/api/v4/core/DIM/:dim", async (request) => {
    const model = services.metadata.current();
    const dim = model.dimensions.get(request.params.dim);
    if (!dim) {
      throw new NotFoundError("DIMENSION_NOT_FOUND", `Dimension ${request.params.dim} does not exist.`);
    }
    return {
      data: {
        COD_DIM: dim.code,
        DESC_DIM: dim.description,
        TABLE_NAME: dim.tableName,
        ID_FIELD: dim.idField,
        CASCADE_DELETE: dim.cascadeDelete.length ? dim.cascadeDelete.join(",") : null,
      },
    };
  });
};
