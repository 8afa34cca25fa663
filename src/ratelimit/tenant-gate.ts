// Fair use of the database between tenants for reads (issue 18 §3, issue 35 §4): one GraphQL
// operation can ask for a hundred statements at once (aliased counts, pages), and 32 REST pages
// sent together are 32 statements or more; queued statements hold every pooled connection — or, on
// the embedded database, which runs one statement at a time, the whole queue — while another
// tenant's cheap request waits behind them. So each tenant's read statements, REST's and GraphQL's
// together, run at most `perTenant` at a time in this process (a lane per tenant,
// src/ratelimit/tenant-lanes.ts); the others of that tenant wait in order, and no tenant waits
// behind another's. One gate per process, made where the routes' dependencies are (src/app.ts).
//
// On the embedded database that is not enough: it runs statements on the service's own thread, one
// at a time, and a tenant's next statement is queued the moment its last one ends, before another
// tenant's request has even been read from its socket, so that request waits for two or more of
// the busy tenant's statements. There the gate also gives the database to read statements `total`
// at a time (as many as one tenant's), by turns between tenants: a turn that ends is handed over on
// the event loop's next turn (after sockets are read), to a waiting tenant other than the one
// served last when there is one. Measured (docs/benchmarks.md, "Tenant isolation (REST and
// GraphQL)"): another tenant's cheap GET p99 under the REST attack of issue 35 §4, 364 ms without
// the turns, 96 ms with them.
import { Gauge, type Registry } from "prom-client";
import type { Queryable } from "../types.ts";
import { createTenantLanes } from "./tenant-lanes.ts";

export interface TenantGate {
  /** `db` for one tenant's reads: each of its statements passes the tenant's gate. */
  queryable(db: Queryable, tenantId: string): Queryable;
  /** Statements of a tenant holding a place in its lane, and waiting for one (tests, metrics). */
  state(tenantId: string): { running: number; waiting: number };
}

export interface TenantGateOptions {
  /** A tenant's read statements at once (GRAPHQL_TENANT_STATEMENTS). */
  perTenant: number;
  /** Read statements of every tenant at once, taken by turns between tenants; none: no bound. */
  total?: number;
  /** Where dimensio_tenant_read_statements is registered. */
  registry?: Registry;
}

/**
 * The gate's bounds: `perTenant` as configured (GRAPHQL_TENANT_STATEMENTS), else 1 on the embedded
 * database (it runs one statement at a time: a tenant gains nothing from more) and 4 on PostgreSQL;
 * on the embedded database, every tenant's together no more than one tenant's, by turns.
 */
export function gateBounds(
  databaseKind: "pglite" | "postgres",
  configured: number,
): { perTenant: number; total?: number } {
  const perTenant = configured || (databaseKind === "pglite" ? 1 : 4);
  return databaseKind === "pglite" ? { perTenant, total: perTenant } : { perTenant };
}

/**
 * At most `total` holders. A turn that ends is handed over on the event loop's next turn, to the
 * first waiting tenant (in order of arrival) other than the one served last, if there is one.
 */
function createFairTurns(total: number) {
  let running = 0;
  // Tenants with waiters, in order of arrival; a tenant served goes to the back.
  const waiting = new Map<string, Array<() => void>>();
  let lastServed: string | null = null;
  let handOver = false;

  function give(): void {
    handOver = false;
    while (running < total && waiting.size > 0) {
      let tenantId: string | undefined;
      for (const id of waiting.keys()) {
        tenantId ??= id;
        if (id !== lastServed) {
          tenantId = id;
          break;
        }
      }
      const queue = waiting.get(tenantId!)!;
      const next = queue.shift()!;
      waiting.delete(tenantId!);
      if (queue.length > 0) waiting.set(tenantId!, queue);
      lastServed = tenantId!;
      running++;
      next();
    }
  }

  function release(): void {
    running--;
    // Even with nobody waiting yet: the tenant that had the turn queues its next statement at once,
    // another's request is read on the event loop's next turn; the hand-over waits for it.
    if (!handOver) {
      handOver = true;
      setImmediate(give);
    }
  }

  function holder(): () => void {
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      release();
    };
  }

  return {
    /** A turn if one is free now and nobody waits (its end), else null. */
    tryEnter(tenantId: string): (() => void) | null {
      if (running >= total || waiting.size > 0 || handOver) return null;
      running++;
      lastServed = tenantId;
      return holder();
    },
    enter(tenantId: string): Promise<() => void> {
      const leave = holder();
      if (running < total && waiting.size === 0 && !handOver) {
        running++;
        lastServed = tenantId;
        return Promise.resolve(leave);
      }
      return new Promise((resolve) => {
        const queue = waiting.get(tenantId);
        if (queue) queue.push(() => resolve(leave));
        else waiting.set(tenantId, [() => resolve(leave)]);
      });
    },
  };
}

export function createTenantGate(options: TenantGateOptions): TenantGate {
  // Statements wait without bound: a request's own limits (page sizes, GraphQL's cost, heavy
  // requests' lanes) bound how many one request asks for.
  const lanes = createTenantLanes({ limit: options.perTenant });
  const turns = options.total === undefined ? null : createFairTurns(Math.max(1, options.total));
  if (options.registry) {
    // Read when scraped: read statements of every tenant holding and waiting for a place in their lane.
    new Gauge({
      name: "dimensio_tenant_read_statements",
      help: "Read statements (REST and GraphQL) holding and waiting for a place in their tenant's gate.",
      labelNames: ["state"],
      registers: [options.registry],
      collect() {
        const { running, waiting } = lanes.totals();
        this.set({ state: "running" }, running);
        this.set({ state: "waiting" }, waiting);
      },
    });
  }
  return {
    queryable(db, tenantId) {
      const waitThenQuery: Queryable["query"] = async (text, params, opts) => {
        const leave = await lanes.enter(tenantId);
        try {
          if (!turns) return await db.query(text, params, opts);
          const endTurn = await turns.enter(tenantId);
          try {
            return await db.query(text, params, opts);
          } finally {
            endTurn();
          }
        } finally {
          leave();
        }
      };
      return {
        // A place free now: the statement goes at once, with no promise of the gate's own
        // (promises per request are bounded: test/query/statements-per-request.test.ts).
        query: ((text, params, opts) => {
          const leave = lanes.tryEnter(tenantId);
          if (!leave) return waitThenQuery(text, params, opts);
          const endTurn = turns ? turns.tryEnter(tenantId) : null;
          if (turns && !endTurn) {
            leave();
            return waitThenQuery(text, params, opts);
          }
          const done = () => {
            endTurn?.();
            leave();
          };
          return db.query(text, params, opts).then(
            (result) => {
              done();
              return result;
            },
            (err: unknown) => {
              done();
              throw err;
            },
          );
        }) as Queryable["query"],
      };
    },
    state: (tenantId) => lanes.state(tenantId),
  };
}
