// Fair use of the database between tenants for GraphQL reads (issue 18 §3): one operation can
// ask for a hundred statements at once (aliased counts, pages), and a hundred queued statements
// hold every pooled connection — or, on the embedded database, which runs one statement at a time,
// the whole queue — while another tenant's cheap request waits behind them. Each tenant's GraphQL
// read statements run at most `limit` at a time in this process, the others of that tenant wait
// in order; other tenants' statements are not behind them.
import type { Queryable } from "../types.ts";

export interface TenantGate {
  /** `db` for one tenant's GraphQL reads: its statements pass the tenant's gate. */
  queryable(db: Queryable, tenantId: string): Queryable;
  /** Statements running and waiting for a tenant (for tests and metrics). */
  state(tenantId: string): { running: number; waiting: number };
}

interface Lane {
  running: number;
  waiting: Array<() => void>;
}

export function createTenantGate(limit: number): TenantGate {
  const lanes = new Map<string, Lane>();

  async function run<T>(tenantId: string, work: () => Promise<T>): Promise<T> {
    let lane = lanes.get(tenantId);
    if (!lane) {
      lane = { running: 0, waiting: [] };
      lanes.set(tenantId, lane);
    }
    if (lane.running >= limit) await new Promise<void>((resolve) => lane.waiting.push(resolve));
    else lane.running++;
    try {
      return await work();
    } finally {
      // The slot passes to the next waiting statement of the tenant, or is given back.
      const next = lane.waiting.shift();
      if (next) next();
      else if (--lane.running === 0) lanes.delete(tenantId);
    }
  }

  return {
    queryable(db, tenantId) {
      return { query: (text, params, opts) => run(tenantId, () => db.query(text, params, opts)) };
    },
    state(tenantId) {
      const lane = lanes.get(tenantId);
      return { running: lane?.running ?? 0, waiting: lane?.waiting.length ?? 0 };
    },
  };
}
