// One lane per tenant in this process: at most `limit` holders at a time, the others wait in
// order of arrival, and other tenants' holders are never behind them. Two things pass through
// lanes (issue 18 §3, issue 35 §4): a tenant's read statements, REST's and GraphQL's
// (src/ratelimit/tenant-gate.ts), and a tenant's heavy requests (src/http/heavy-requests.ts), so a
// burst of one tenant's work costs that tenant latency, not everyone's.
import { RateLimitError } from "../errors.ts";

export interface TenantLanes {
  /**
   * Waits for a place in `tenantId`'s lane; resolves with the function that gives it back (once;
   * later calls do nothing). Refused with 429 when `maxWaiting` already wait; a waiter whose
   * `signal` aborts leaves the queue (its promise rejects with the signal's reason).
   */
  enter(tenantId: string, signal?: AbortSignal): Promise<() => void>;
  /** A place in `tenantId`'s lane if one is free now (its give-back function), else null. */
  tryEnter(tenantId: string): (() => void) | null;
  /** Holders and waiters of a tenant's lane (tests, metrics). */
  state(tenantId: string): { running: number; waiting: number };
  /** Holders and waiters of every lane together (metrics). */
  totals(): { running: number; waiting: number };
}

interface Lane {
  running: number;
  waiting: Array<() => void>;
}

export interface TenantLanesOptions {
  /** Holders at a time per tenant (at least 1). */
  limit: number;
  /** Waiters per tenant past which entering is refused (429); Infinity waits without bound. */
  maxWaiting?: number;
  /** The refusal's message (what waits in the lane). */
  refusal?: (maxWaiting: number) => string;
}

export function createTenantLanes(options: TenantLanesOptions): TenantLanes {
  const limit = Math.max(1, options.limit);
  const maxWaiting = options.maxWaiting ?? Number.POSITIVE_INFINITY;
  const lanes = new Map<string, Lane>();

  function leave(tenantId: string, lane: Lane): void {
    // The place passes to the next waiter of the tenant, or is given back.
    const next = lane.waiting.shift();
    if (next) next();
    else if (--lane.running === 0) lanes.delete(tenantId);
  }

  function releaser(tenantId: string, lane: Lane): () => void {
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      leave(tenantId, lane);
    };
  }

  return {
    tryEnter(tenantId) {
      let lane = lanes.get(tenantId);
      if (!lane) {
        lane = { running: 0, waiting: [] };
        lanes.set(tenantId, lane);
      }
      if (lane.running >= limit) return null;
      lane.running++;
      return releaser(tenantId, lane);
    },
    enter(tenantId, signal) {
      let lane = lanes.get(tenantId);
      if (!lane) {
        lane = { running: 0, waiting: [] };
        lanes.set(tenantId, lane);
      }
      const own = lane;
      if (own.running < limit) {
        own.running++;
        return Promise.resolve(releaser(tenantId, own));
      }
      if (own.waiting.length >= maxWaiting) {
        return Promise.reject(
          new RateLimitError(
            options.refusal?.(maxWaiting) ?? "Too much of this tenant's work waits; retry later.",
            {
              headers: { "Retry-After": "1" },
              extra: { retry_after: 1 },
            },
          ),
        );
      }
      if (signal?.aborted) return Promise.reject(signal.reason);
      return new Promise((resolve, reject) => {
        const admit = () => {
          signal?.removeEventListener("abort", abandon);
          resolve(releaser(tenantId, own));
        };
        const abandon = () => {
          const at = own.waiting.indexOf(admit);
          if (at >= 0) own.waiting.splice(at, 1);
          reject(signal?.reason);
        };
        signal?.addEventListener("abort", abandon, { once: true });
        own.waiting.push(admit);
      });
    },
    state(tenantId) {
      const lane = lanes.get(tenantId);
      return { running: lane?.running ?? 0, waiting: lane?.waiting.length ?? 0 };
    },
    totals() {
      let running = 0;
      let waiting = 0;
      for (const lane of lanes.values()) {
        running += lane.running;
        waiting += lane.waiting.length;
      }
      return { running, waiting };
    },
  };
}
