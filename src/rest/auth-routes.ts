import type { FastifyPluginAsync } from "fastify";
import type { RouteDeps } from "./deps.ts";

export const authRoutes: FastifyPluginAsync<RouteDeps> = async (_app, _deps) => {};
