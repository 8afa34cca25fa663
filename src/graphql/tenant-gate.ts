// Fair use of the database between tenants for GraphQL reads (issue 18 §3): one operation can
// ask for a hundred statements at once (aliased counts, pages), and a hundred queued statements
// hold every pooled connection — or, on the embedded database, which runs one statement at a time,
// the whole queue — while another tenant's cheap request waits behind them. Each tenant's GraphQL
// read statements run at most `limit` at a time in this process (a lane per tenant,
// src/ratelimit/tenant-lanes.ts), the others of that tenant wait in order.
import { createTenantLanes } from "../ratelimit/tenant-lanes.ts";
import type { Queryable } from "../types.ts";

export interface TenantGate {
  /** `db` for one tenant's GraphQL reads: its statements pass the tenant's gate. */
  queryable(db: Queryable, tenantId: string): Queryable;
  /** Statements running and waiting for a tenant (for tests and metrics). */
  state(tenantId: string): { running: number; waiting: number };
}

export function createTenantGate(limit: number): TenantGate {
  // Statements of one operation wait without bound: the operation's limits bound how many.
  const lanes = createTenantLanes({ limit });
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
