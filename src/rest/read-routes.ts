import type { FastifyPluginAsync } from "fastify";
import type { RouteDeps } from "./deps.ts";

export const readRoutes: FastifyPluginAsync<RouteDeps> = async (_app, _deps) => {};
