// Webhook registrations and their delivery log (decisions.md §8), and the event counts of the
// analytics writer: /api/v4/webhooks… and /api/v4/analytics/events. Tenant admins only (level 4);
// the request's source is not needed here.
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { authorizeTenantAdmin } from "../auth/authorize.ts";
import { ValidationError } from "../errors.ts";
import { readEventCounts } from "../events/analytics.ts";
import { callerOf } from "../http/protected.ts";
import {
  createWebhook,
  deleteWebhook,
  getWebhook,
  listDeliveries,
  listWebhooks,
  updateWebhook,
  type WebhookDeps,
} from "../resolvers/webhooks.ts";
import { type RouteDeps, servicesOf } from "./deps.ts";

interface IdParams {
  id: string;
}

function oneParam(request: FastifyRequest, name: string): string | undefined {
  const v = (request.query as Record<string, unknown>)[name];
  if (v === undefined) return undefined;
  if (typeof v !== "string") {
    throw new ValidationError("INVALID_PARAMETER", `${name} is given more than once.`, { field: name });
  }
  return v;
}

/**
 * A webhook request's dependencies on its tenant's database. Prisma is read on use (made when the
 * first webhook request needs it) by the class's getter: a getter in an object literal would be an
 * accessor pair per request (docs/decisions.md, "Per-request objects have no accessors of their own").
 */
class TenantWebhookDeps implements WebhookDeps {
  constructor(
    private readonly tenant: { readonly prisma: WebhookDeps["prisma"] },
    readonly metadata: WebhookDeps["metadata"],
    readonly allowPrivate: boolean,
    readonly maxPerTenant: number,
  ) {}

  get prisma(): WebhookDeps["prisma"] {
    return this.tenant.prisma;
  }
}

export const webhookRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services }) => {
  // Registrations and deliveries live in the tenant's database (decisions.md §18).
  const depsOf = (request: FastifyRequest): WebhookDeps =>
    new TenantWebhookDeps(
      servicesOf(services, request),
      services.metadata,
      services.config.webhookAllowPrivate,
      services.config.webhookMaxPerTenant,
    );
  const admin = (request: FastifyRequest) => authorizeTenantAdmin(callerOf(request).principal);

  app.post("/api/v4/webhooks", async (request, reply) => {
    const caller = admin(request);
    reply.status(201);
    return createWebhook(depsOf(request), caller, request.body);
  });
  app.get("/api/v4/webhooks", async (request) => ({
    data: await listWebhooks(depsOf(request), admin(request)),
  }));
  app.get<{ Params: IdParams }>("/api/v4/webhooks/:id", async (request) =>
    getWebhook(depsOf(request), admin(request), request.params.id),
  );
  app.patch<{ Params: IdParams }>("/api/v4/webhooks/:id", async (request) =>
    updateWebhook(depsOf(request), admin(request), request.params.id, request.body),
  );
  app.delete<{ Params: IdParams }>("/api/v4/webhooks/:id", async (request) =>
    deleteWebhook(depsOf(request), admin(request), request.params.id),
  );
  app.get<{ Params: IdParams }>("/api/v4/webhooks/:id/deliveries", async (request) => {
    const caller = admin(request);
    const raw = oneParam(request, "$num_rows");
    const limit = raw === undefined ? 100 : Number(raw);
    if (!Number.isInteger(limit) || limit < 1 || limit > 1000) {
      throw new ValidationError("INVALID_PARAMETER", "$num_rows must be an integer from 1 to 1000.", {
        field: "$num_rows",
      });
    }
    return { data: await listDeliveries(depsOf(request), caller, request.params.id, limit) };
  });

  app.get("/api/v4/analytics/events", async (request) => {
    const caller = admin(request);
    return {
      data: await readEventCounts(servicesOf(services, request).readDb, caller, {
        from: oneParam(request, "from"),
        to: oneParam(request, "to"),
        dimension: oneParam(request, "dimension"),
      }),
    };
  });
};
