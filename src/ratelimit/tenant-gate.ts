// Fair use of the database between tenants for reads (issue 18 §3, issue 35 §4): one GraphQL
// operation can ask for a hundred statements at once (aliased counts, pages), and 32 REST pages
// sent together are 32 statements or more; queued statements hold every pooled connection — or, on
// the embedded database, which runs one statement at a time, the whole queue — while another
// tenant's cheap request waits behind them. So each tenant's read statements, REST's and GraphQL's
// together, run at most `limit` at a time in this process (a lane per tenant,
// src/ratelimit/tenant-lanes.ts); the others of that tenant wait in order, and no tenant waits
// behind another's. One gate per process, made where the routes' dependencies are (src/app.ts).
import { Gauge, type Registry } from "prom-client";
import type { Queryable } from "../types.ts";
import { createTenantLanes } from "./tenant-lanes.ts";

export interface TenantGate {
  /** `db` for one tenant's reads: each of its statements passes the tenant's gate. */
  queryable(db: Queryable, tenantId: string): Queryable;
  /** Statements running and waiting for a tenant (for tests and metrics). */
  state(tenantId: string): { running: number; waiting: number };
}

/** A tenant's read statements at once per process when not configured: the embedded database runs one at a time. */
export function defaultTenantStatements(databaseKind: "pglite" | "postgres"): number {
  return databaseKind === "pglite" ? 1 : 4;
}

export function createTenantGate(limit: number, registry?: Registry): TenantGate {
  // Statements wait without bound: a request's own limits (page sizes, GraphQL's cost, heavy
  // requests' lanes) bound how many one request asks for.
  const lanes = createTenantLanes({ limit });
  if (registry) {
    // Read when scraped: read statements of every tenant running and waiting in this process.
    new Gauge({
      name: "dimensio_tenant_read_statements",
      help: "Read statements (REST and GraphQL) running and waiting in their tenant's gate.",
      labelNames: ["state"],
      registers: [registry],
      collect() {
        const { running, waiting } = lanes.totals();
        this.set({ state: "running" }, running);
        this.set({ state: "waiting" }, waiting);
      },
    });
  }
  return {
    queryable(db, tenantId) {
      return {
        query: async (text, params, opts) => {
          const leave = await lanes.enter(tenantId);
          try {
            return await db.query(text, params, opts);
          } finally {
            leave();
          }
        },
      };
    },
    state: (tenantId) => lanes.state(tenantId),
  };
}
