// A GraphQL request's objects die young: once it is answered nothing long-lived points at the
// request, its reply or its operation context, so young collections free them and none is promoted
// to the old generation. An operation context with getters in an object literal broke this: V8
// gives each such object an accessor pair of its own, allocated in the old generation, whose
// closures held the request and its reply through every young collection until the next full one;
// every GraphQL request's objects were promoted, four times the scavenging and a full collection
// every few hundred milliseconds under load (docs/decisions.md, "Per-request objects have no
// accessors of their own"). Measured on the service as `npm start` runs it, from V8's own trace of
// its young collections (bytes promoted), under GraphQL and REST requests over HTTP.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginOverHttp, UNLIMITED_ENV } from "../helpers/auth.ts";
import { type DemoService, type Running, startDemoService } from "../helpers/process.ts";

const REQUESTS = 3000;
const CONCURRENCY = 8;

/** Bytes promoted by the young collections traced in `trace` (V8's --trace-gc-nvp lines). */
function promotedBytes(trace: string): { collections: number; promoted: number } {
  let collections = 0;
  let promoted = 0;
  for (const line of trace.split("\n")) {
    if (!line.includes(" gc=s ")) continue;
    collections++;
    promoted += Number(/ promoted=(\d+)/.exec(line)?.[1] ?? 0);
  }
  return { collections, promoted };
}

describe("GraphQL request retention", () => {
  let service: DemoService;
  let base: string;
  let running: Running;
  let token: string;

  beforeAll(async () => {
    service = await startDemoService(UNLIMITED_ENV, ["--trace-gc-nvp"]);
    ({ base, running } = service);
    token = await loginOverHttp(base, "olga", "olga-demo-1");
  });
  afterAll(async () => {
    await service?.stop();
  });

  /** Promoted bytes per request over REQUESTS requests of `send`, CONCURRENCY at a time. */
  async function promotedPerRequest(
    send: () => Promise<Response>,
  ): Promise<{ perRequest: number; collections: number }> {
    const run = async (count: number) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next++ < count) {
            const res = await send();
            expect(res.status).toBe(200);
            await res.arrayBuffer();
          }
        }),
      );
    };
    await run(300); // caches and compiled code
    const from = running.output().length;
    await run(REQUESTS);
    const { collections, promoted } = promotedBytes(running.output().slice(from));
    return { perRequest: Math.round(promoted / REQUESTS), collections };
  }

  it("promotes next to nothing of a GraphQL request, as of a REST read", async () => {
    const auth = { authorization: `Bearer ${token}` };
    const graphql = await promotedPerRequest(() =>
      fetch(`${base}/graphql`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ query: `{ PO_count(source: "purchasing-1") }` }),
      }),
    );
    const rest = await promotedPerRequest(() =>
      fetch(`${base}/api/v4/core/PO/count?source=purchasing-1`, { headers: auth }),
    );
    // The requests made young collections to look at (a few MB of garbage each).
    expect(graphql.collections).toBeGreaterThan(5);
    expect(rest.collections).toBeGreaterThan(5);
    // Held, a request was promoted whole: several KB each. Freed young: tens of bytes.
    expect({ graphql: graphql.perRequest, rest: rest.perRequest }).toEqual({
      graphql: expect.toSatisfy((bytes: number) => bytes < 1000),
      rest: expect.toSatisfy((bytes: number) => bytes < 1000),
    });
  });
});
