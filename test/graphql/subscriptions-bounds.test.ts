// Live subscriptions are bounded (issue 18 §3): a cap per user and per process, and a
// subscription ends — one error result, then the stream closes — when its session is logged out,
// when the user's grants change, and when its token expires. Real HTTP, GraphQL over SSE.
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { eventually } from "../events/support.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { client, NO_RATE_LIMITS } from "../write/http.ts";
import { type SseSubscription, subscribe } from "./sse.ts";

const CITY = `subscription { CITY_events(source: "anag-3") { event_type record_id } }`;
const CUST = `subscription { CUST_events(source: "anag-1") { event_type record_id } }`;

/** The stream ended by the server with its `nth` result an error of `code`. */
async function endsWith(sub: SseSubscription, code: string, nth = 1): Promise<void> {
  await sub.waitFor(nth);
  const last = sub.events.at(-1)!;
  expect(last.data.errors?.[0]?.extensions?.code).toBe(code);
  await Promise.race([
    sub.closed,
    new Promise((_, reject) => setTimeout(() => reject(new Error("the stream stayed open")), 10_000)),
  ]);
}

async function login(t: TestApp, user: keyof typeof SAMPLE_USERS): Promise<string> {
  return loginAs(t.app, SAMPLE_USERS[user].username, SAMPLE_USERS[user].password);
}

async function listen(t: TestApp): Promise<string> {
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  return `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
}

describe.each(BACKENDS)("GraphQL subscription bounds (%s)", (backend) => {
  let t: TestApp;
  let base: string;
  let runtime: EventRuntime;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        EVENTS_POLL_MS: "60000",
        SUBSCRIPTIONS_MAX_PER_USER: "2",
        SUBSCRIPTIONS_MAX_PER_PROCESS: "3",
      },
    });
    base = await listen(t);
    runtime = await startEventRuntime(t.services, { relay: true });
  });
  afterAll(async () => {
    await runtime?.stop();
    await t?.close();
  });

  it("a user holds at most SUBSCRIPTIONS_MAX_PER_USER, the process SUBSCRIPTIONS_MAX_PER_PROCESS", async () => {
    const anna = await login(t, "anna");
    const greta = await login(t, "greta");
    const a1 = await subscribe(base, anna, CITY);
    const a2 = await subscribe(base, anna, CUST);
    const a3 = await subscribe(base, anna, CITY);
    await endsWith(a3, "TOO_MANY_SUBSCRIPTIONS");
    expect(a3.events[0]!.data.errors[0].extensions).toMatchObject({
      status: 429,
      details: { max_per_user: 2 },
    });
    const g1 = await subscribe(base, greta, CITY);
    const g2 = await subscribe(base, greta, CITY);
    await endsWith(g2, "TOO_MANY_SUBSCRIPTIONS");
    expect(g2.events[0]!.data.errors[0].extensions.details).toEqual({ max_per_process: 3 });
    expect([a1, a2, g1].map((s) => [s.status, s.isClosed(), s.events.length])).toEqual([
      [200, false, 0],
      [200, false, 0],
      [200, false, 0],
    ]);
    // A closed subscription frees its place.
    await a1.close();
    const again = await eventually(
      async () => {
        const s = await subscribe(base, greta, CITY);
        // A refusal arrives at once; an admitted subscription stays silent.
        const refused = await s.waitFor(1, 300).then(
          () => true,
          () => false,
        );
        if (!refused) return s;
        await s.close();
        return undefined;
      },
      { what: "a place freed by the closed subscription" },
    );
    expect(again.isClosed()).toBe(false);
    for (const s of [a2, g1, again]) await s.close();
  });

  it("logging out ends the session's subscriptions: an error, then the stream closes", async () => {
    const token = await login(t, "anna");
    const sub = await subscribe(base, token, CITY);
    const created = await client(t.app, await login(t, "anna")).post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "SB1", NAME: "Before logout", COUNTRY: "IT" },
    });
    expect(created.status).toBe(201);
    await sub.waitFor(1);
    expect(sub.events[0]!.data.data.CITY_events).toEqual({ event_type: "CITYCreated", record_id: "SB1" });
    const out = await t.app.inject({ method: "POST", url: "/auth/logout", headers: bearer(token) });
    expect(out.statusCode).toBeLessThan(300);
    await endsWith(sub, "TOKEN_INVALID", 2);
    expect(sub.events).toHaveLength(2);
  });

  it("a change of the user's grants ends the subscription; a notice without a change does not", async () => {
    const token = await login(t, "marco");
    const sub = await subscribe(base, token, CUST);
    // Announced (the trigger fires) but the grants are the same: the subscription goes on.
    await t.services.db.query(`UPDATE "TB_USER_GRANT" SET "LEVEL" = "LEVEL" WHERE "USER_ID" = 'marco'`);
    const anna = client(t.app, await login(t, "anna"));
    const created = await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Still streaming" } });
    expect(created.status).toBe(201);
    await sub.waitFor(1);
    expect(sub.events[0]!.data.data.CUST_events.event_type).toBe("CUSTCreated");
    await t.services.db.query(
      `INSERT INTO "TB_USER_GRANT" ("USER_ID", "COD_MENU", "OPERATIONS", "LEVEL") VALUES ('marco', 'price-1', '{read}', 1)`,
    );
    try {
      await endsWith(sub, "GRANTS_CHANGED", 2);
      expect(sub.events.at(-1)!.data.errors[0].extensions.status).toBe(403);
    } finally {
      await t.services.db.query(
        `DELETE FROM "TB_USER_GRANT" WHERE "USER_ID" = 'marco' AND "COD_MENU" = 'price-1'`,
      );
    }
  });
});

describe.each(BACKENDS)("GraphQL subscriptions: a tenant's share of the process (%s)", (backend) => {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        EVENTS_POLL_MS: "60000",
        SUBSCRIPTIONS_MAX_PER_USER: "2",
        SUBSCRIPTIONS_MAX_PER_TENANT: "3",
        SUBSCRIPTIONS_MAX_PER_PROCESS: "10",
      },
    });
    base = await listen(t);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("a tenant holds at most SUBSCRIPTIONS_MAX_PER_TENANT; another tenant still subscribes", async () => {
    const anna = await login(t, "anna");
    const marco = await login(t, "marco");
    const lucia = await login(t, "lucia");
    const greta = await login(t, "greta");
    // acme: anna twice, marco once: the tenant's three places.
    const held = [
      await subscribe(base, anna, CITY),
      await subscribe(base, anna, CITY),
      await subscribe(base, marco, CUST),
    ];
    const refused = await subscribe(base, lucia, CUST);
    await endsWith(refused, "TOO_MANY_SUBSCRIPTIONS");
    expect(refused.events[0]!.data.errors[0].extensions).toMatchObject({
      status: 429,
      details: { max_per_tenant: 3 },
    });
    // globex is not held back by acme's share.
    const other = await subscribe(base, greta, CITY);
    const otherRefused = await other.waitFor(1, 300).then(
      () => true,
      () => false,
    );
    expect(otherRefused).toBe(false);
    expect([...held, other].map((s) => [s.status, s.isClosed(), s.events.length])).toEqual([
      [200, false, 0],
      [200, false, 0],
      [200, false, 0],
      [200, false, 0],
    ]);
    for (const s of [...held, other]) await s.close();
  });
});

describe("GraphQL subscriptions end when their token expires", () => {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, ACCESS_TOKEN_ACTIVE_S: "2", ACCESS_TOKEN_RENEWABLE_S: "3" },
    });
    base = await listen(t);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("a subscription ends with TOKEN_EXPIRED at its token's expiry", async () => {
    const sub = await subscribe(base, await login(t, "anna"), CITY);
    expect(sub.status).toBe(200);
    await endsWith(sub, "TOKEN_EXPIRED");
    expect(sub.events[0]!.data.errors[0].extensions).toMatchObject({ status: 401 });
  });

  it("the subscriptions of one token end together at its expiry; one closed before leaves the others watched", async () => {
    const token = await login(t, "anna");
    const [closedEarly, ...rest] = await Promise.all([
      subscribe(base, token, CITY),
      subscribe(base, token, CITY),
      subscribe(base, token, CUST),
    ]);
    expect([closedEarly, ...rest].map((s) => s.status)).toEqual([200, 200, 200]);
    await closedEarly!.close();
    for (const sub of rest) await endsWith(sub, "TOKEN_EXPIRED");
    expect(closedEarly!.events).toHaveLength(0);
  });
});
