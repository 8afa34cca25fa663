// A lane per tenant (src/ratelimit/tenant-lanes.ts), which heavy requests and GraphQL statements
// pass through: at most `limit` holders per tenant, the rest wait in order of arrival, a waiter
// past `maxWaiting` is refused with 429, a waiter whose client went away leaves the queue, and no
// tenant ever waits behind another's holders.
import { describe, expect, it } from "vitest";
import { RateLimitError } from "../../src/errors.ts";
import { createTenantLanes } from "../../src/ratelimit/tenant-lanes.ts";

/** Whether a promise has settled by the end of the current microtask queue. */
async function settled(p: Promise<unknown>): Promise<boolean> {
  let done = false;
  p.then(
    () => {
      done = true;
    },
    () => {
      done = true;
    },
  );
  await new Promise((resolve) => setImmediate(resolve));
  return done;
}

describe("tenant lanes", () => {
  it("admits `limit` holders of a tenant and lets the others wait in order of arrival", async () => {
    const lanes = createTenantLanes({ limit: 2 });
    const first = await lanes.enter("acme");
    const second = await lanes.enter("acme");
    const order: string[] = [];
    const third = lanes.enter("acme").then((leave) => {
      order.push("third");
      return leave;
    });
    const fourth = lanes.enter("acme").then((leave) => {
      order.push("fourth");
      return leave;
    });
    expect(await settled(third)).toBe(false);
    expect(lanes.state("acme")).toEqual({ running: 2, waiting: 2 });

    first();
    first(); // giving a place back twice gives it back once
    expect(await settled(third)).toBe(true);
    expect(await settled(fourth)).toBe(false);
    expect(lanes.state("acme")).toEqual({ running: 2, waiting: 1 });

    second();
    (await third)();
    (await fourth)();
    expect(order).toEqual(["third", "fourth"]);
    expect(lanes.state("acme")).toEqual({ running: 0, waiting: 0 });
    expect(lanes.totals()).toEqual({ running: 0, waiting: 0 });
  });

  it("never puts one tenant behind another's holders", async () => {
    const lanes = createTenantLanes({ limit: 1 });
    await lanes.enter("acme");
    const waiting = lanes.enter("acme");
    const globex = lanes.enter("globex");
    expect(await settled(globex)).toBe(true);
    expect(await settled(waiting)).toBe(false);
    expect(lanes.totals()).toEqual({ running: 2, waiting: 1 });
  });

  it("refuses with 429 and Retry-After once maxWaiting already wait", async () => {
    const lanes = createTenantLanes({ limit: 1, maxWaiting: 1, refusal: (n) => `${n} wait already` });
    const leave = await lanes.enter("acme");
    const waiting = lanes.enter("acme");
    const refused = await lanes.enter("acme").then(
      () => null,
      (err: unknown) => err,
    );
    expect(refused).toBeInstanceOf(RateLimitError);
    expect(refused).toMatchObject({
      status: 429,
      message: "1 wait already",
      headers: { "Retry-After": "1" },
    });
    // Another tenant is not refused for acme's queue.
    expect(await settled(lanes.enter("globex"))).toBe(true);
    leave();
    expect(await settled(waiting)).toBe(true);
  });

  it("takes a waiter whose signal aborts out of the queue; the next one gets the place", async () => {
    const lanes = createTenantLanes({ limit: 1 });
    const leave = await lanes.enter("acme");
    const gone = new AbortController();
    const abandoned = lanes.enter("acme", gone.signal);
    const next = lanes.enter("acme");
    expect(lanes.state("acme").waiting).toBe(2);
    gone.abort(new Error("client closed"));
    await expect(abandoned).rejects.toThrow("client closed");
    expect(lanes.state("acme")).toEqual({ running: 1, waiting: 1 });
    leave();
    expect(await settled(next)).toBe(true);
    (await next)();
    expect(lanes.state("acme")).toEqual({ running: 0, waiting: 0 });
    // An already aborted signal does not queue at all.
    const held = await lanes.enter("acme");
    await expect(lanes.enter("acme", AbortSignal.abort(new Error("gone")))).rejects.toThrow("gone");
    expect(lanes.state("acme").waiting).toBe(0);
    held();
  });
});
