// Heavy requests take turns per tenant (issue 18 §3: "a cheap GET of another tenant under 100 ms
// p99" while one tenant sends the heaviest requests the limits let through). A request whose
// estimated size — the values it may answer or read: a GraphQL operation's node estimate
// (src/graphql/complexity.ts), a REST list's page, offset, sort and grouping work
// (src/rest/read-estimate.ts) — reaches `thresholdValues` runs in its
// tenant's lane: at most `perTenant` such requests of one tenant at a time in this process, the
// others wait in order (a client that goes away leaves the queue), and past `maxWaiting` waiting
// the request is refused with 429 and Retry-After. Measured (docs/benchmarks.md, isolation): four
// concurrent heavy requests of one tenant keep the event loop busy enough to hold another tenant's
// cheap GET for hundreds of milliseconds; one at a time, it waits for one of their steps at most.
// Cheap requests never enter a lane; every read's statements, cheap or heavy, also pass the
// tenant's read gate (src/ratelimit/tenant-gate.ts).
import type { ServerResponse } from "node:http";
import { Gauge, type Registry } from "prom-client";
import { createTenantLanes, type TenantLanes } from "../ratelimit/tenant-lanes.ts";

export interface HeavyRequestOptions {
  /** Estimated values from which a request is heavy; 0 turns the lanes off. */
  thresholdValues: number;
  /** A tenant's heavy requests running at once per process. */
  perTenant: number;
  /** A tenant's heavy requests waiting, past which another is refused (429). */
  maxWaiting: number;
}

/**
 * The request a turn is for, as the lanes see it, whatever carries it (an HTTP request, an
 * operation on a WebSocket): one object per request, so that a request never waits for a turn it
 * holds, and `gone`, aborted when its client goes away (it then leaves the queue).
 */
export interface LaneClient {
  readonly gone: AbortSignal;
}

const httpClients = new WeakMap<ServerResponse, LaneClient>();

/** An HTTP request's lane client; its getter is the class's (no accessor pair per request). */
class HttpLaneClient implements LaneClient {
  #gone: AbortSignal | null = null;

  constructor(private readonly response: ServerResponse) {}

  get gone(): AbortSignal {
    if (!this.#gone) {
      const controller = new AbortController();
      this.response.once("close", () =>
        controller.abort(new Error("the client closed the connection while waiting")),
      );
      this.#gone = controller.signal;
    }
    return this.#gone;
  }
}

/**
 * The lane client of an HTTP request, one per response: `gone` is made when first asked for (a
 * request that never waits makes none) and aborted when the response closes (the client went
 * away, or the answer was sent).
 */
export function httpLaneClient(response: ServerResponse): LaneClient {
  let client = httpClients.get(response);
  if (!client) {
    client = new HttpLaneClient(response);
    httpClients.set(response, client);
  }
  return client;
}

export interface HeavyRequests {
  /** Whether a request of `values` is heavy (takes turns in its tenant's lane). */
  isHeavy(values: number): boolean;
  /**
   * Runs `work` now when `values` is under the threshold, else in `tenantId`'s lane; a client
   * that goes away while waiting leaves the queue (its request ends unanswered). `clientOf` is
   * asked only for a heavy request: a cheap one makes no lane client.
   */
  run<T>(tenantId: string, values: number, clientOf: () => LaneClient, work: () => Promise<T>): Promise<T>;
  /** Whether `enter` would wait for a turn: false for a cheap request (it enters at once). */
  waits(values: number, client: LaneClient): boolean;
  /** As `run`, for work that ends elsewhere: resolves with the function that ends the turn. */
  enter(tenantId: string, values: number, client: LaneClient): Promise<() => void>;
  /** Heavy requests running and waiting for a tenant (tests, metrics). */
  state(tenantId: string): { running: number; waiting: number };
}

export function createHeavyRequests(options: HeavyRequestOptions, registry?: Registry): HeavyRequests {
  const lanes: TenantLanes = createTenantLanes({
    limit: options.perTenant,
    maxWaiting: options.maxWaiting,
    refusal: (n) =>
      `${n} of this tenant's heavy requests already wait here; retry in a second or ask for less.`,
  });
  if (registry) {
    // Read when scraped: heavy requests of every tenant running and waiting in this process.
    new Gauge({
      name: "dimensio_heavy_requests",
      help: "Heavy requests (HEAVY_REQUEST_VALUES) running and waiting in their tenant's lane.",
      labelNames: ["state"],
      registers: [registry],
      collect() {
        const { running, waiting } = lanes.totals();
        this.set({ state: "running" }, running);
        this.set({ state: "waiting" }, waiting);
      },
    });
  }

  const light = () => {};
  // A request holds at most one turn: a request that took its turn for its large body
  // (heavyBodies) runs its heavy work in that same turn, and never waits for itself.
  const holding = new WeakSet<LaneClient>();

  const isHeavy = (values: number) => options.thresholdValues > 0 && values >= options.thresholdValues;
  const waits = (values: number, client: LaneClient) => isHeavy(values) && !holding.has(client);

  async function enter(tenantId: string, values: number, client: LaneClient): Promise<() => void> {
    if (!waits(values, client)) return light;
    const leave = await lanes.enter(tenantId, client.gone);
    holding.add(client);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      holding.delete(client);
      leave();
    };
  }

  return {
    isHeavy,
    waits,
    enter,
    async run(tenantId, values, clientOf, work) {
      if (!isHeavy(values)) return work();
      const leave = await enter(tenantId, values, clientOf());
      try {
        return await work();
      } finally {
        leave();
      }
    },
    state: (tenantId) => lanes.state(tenantId),
  };
}
