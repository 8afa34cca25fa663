// Totals kept until a write commits (src/resolvers/read/totals-cache.ts, issue 19): the next page
// of the same filter and a repeated count send no count; any write forgets every kept total, in
// the writing process before its answer, and in another process of the same database when the
// database's notice arrives. A full-text search's totals are always counted.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.ts";
import { openPostgres } from "../../src/db/database.ts";
import { createLogger } from "../../src/logger.ts";
import { createTotalsCache } from "../../src/resolvers/read/totals-cache.ts";
import { openServices, type Services } from "../../src/services.ts";
import type { Database } from "../../src/types.ts";
import { eventually } from "../events/support.ts";
import { bearer, loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";

const LIST = "/api/v4/core/CUST?source=anag-1&$num_rows=2";
const COUNT = "/api/v4/core/CUST/count?source=anag-1";

describe.each(BACKENDS)("totals kept until a write (%s)", (backend) => {
  let t: TestApp;
  let token: string;
  const statements: string[] = [];

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: UNLIMITED_ENV,
      onStatement: (text) => statements.push(text),
    });
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
  }, 60_000);
  afterAll(async () => t?.close());

  /** The answer's body, and the statements the request sent. */
  async function call(method: "GET" | "POST" | "DELETE", url: string, payload?: unknown) {
    statements.length = 0;
    const res = await t.app.inject({ method, url, headers: bearer(token), ...(payload ? { payload } : {}) });
    expect(res.statusCode, res.body).toBeLessThan(300);
    // biome-ignore lint/suspicious/noExplicitAny: bodies are inspected freely
    return { body: res.json() as any, sent: statements.filter((s) => !/^(BEGIN|COMMIT)/.test(s)) };
  }
  const counting = (sent: string[]) => sent.some((s) => /count\(\*\)/i.test(s));

  it("pages after the first, and repeated counts, send no count until a write commits", async () => {
    const first = await call("GET", `${LIST}&filter[VIP]=true`);
    expect(counting(first.sent)).toBe(true);
    const total = first.body.meta.total as number;
    expect(total).toBeGreaterThan(0);

    const next = await call("GET", `${LIST}&filter[VIP]=true&$offset=1`);
    expect(next.sent).toHaveLength(1);
    expect(counting(next.sent)).toBe(false);
    expect(next.body.meta).toMatchObject({ total, offset: 1 });

    const count = await call("GET", `${COUNT}&filter[VIP]=true`);
    expect(count.body).toMatchObject({ count: total });
    const again = await call("GET", `${COUNT}&filter[VIP]=true`);
    expect(again.sent).toHaveLength(0);
    expect(again.body).toEqual(count.body);

    // A create: the very next list and count see it.
    const created = await call("POST", "/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Kept Totals Srl", CITY_ID: "MI", VIP: true },
    });
    const id = created.body.data.CUST_ID;
    const after = await call("GET", `${LIST}&filter[VIP]=true&$offset=1`);
    expect(counting(after.sent)).toBe(true);
    expect(after.body.meta.total).toBe(total + 1);
    expect((await call("GET", `${COUNT}&filter[VIP]=true`)).body).toMatchObject({ count: total + 1 });

    // A delete: likewise.
    await call("DELETE", `/api/v4/core/CUST/${id}?source=anag-1`);
    expect((await call("GET", `${LIST}&filter[VIP]=true`)).body.meta.total).toBe(total);
  });

  it("keeps a total per filter, tenant rules and mode, never a search's", async () => {
    const vip = (await call("GET", `${LIST}&filter[VIP]=true`)).body.meta.total;
    const all = (await call("GET", LIST)).body.meta.total;
    expect(all).toBeGreaterThan(vip);
    expect((await call("GET", `${LIST}&$count=exact`)).body.meta.total).toBe(all);
    const searched = await call("GET", `${LIST}&$search=Rossi`);
    const searchedAgain = await call("GET", `${LIST}&$search=Rossi`);
    expect(counting(searchedAgain.sent)).toBe(true);
    expect(searchedAgain.body.meta.total).toBe(searched.body.meta.total);
  });
});

// Another process of the same database: its kept totals go when the write's notice arrives.
describe.each(BACKENDS.filter((b) => b === "postgres"))("totals in another process (%s)", (backend) => {
  let t: TestApp;
  let other: Services;
  let otherApp: Awaited<ReturnType<typeof buildApp>>;
  let token: string;
  let otherToken: string;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: UNLIMITED_ENV });
    if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
    other = await openServices(t.services.config, {
      db: openPostgres(t.services.db.connectionString, { max: 4 }),
      logger: createLogger("silent"),
    });
    otherApp = await buildApp(other);
    await otherApp.ready();
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    otherToken = await loginAs(otherApp, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
  }, 60_000);
  afterAll(async () => {
    await otherApp?.close();
    await other?.close();
    await t?.close();
  });

  it("a create in one process: the other's next total counts it once the notice is in", async () => {
    const totalThere = async () =>
      (await otherApp.inject({ method: "GET", url: LIST, headers: bearer(otherToken) })).json().meta
        .total as number;
    const before = await totalThere();
    expect(await totalThere()).toBe(before);
    expect(other.totals.size()).toBeGreaterThan(0);
    const created = await t.app.inject({
      method: "POST",
      url: "/api/v4/core/CUST?source=anag-1",
      headers: bearer(token),
      payload: { data: { NAME: "Elsewhere Srl", CITY_ID: "RM" } },
    });
    expect(created.statusCode).toBe(201);
    await eventually(() => other.totals.size() === 0, { what: "the other process to forget its totals" });
    expect(await totalThere()).toBe(before + 1);
  });
});

// What the cache does with the listening connection's states, told through the Database's listen
// (the states themselves are proved on a real connection in test/robustness/faults-database.test.ts).
describe("totals while the listening connection is lost", () => {
  it("keeps nothing from the loss until the connection is back, whatever notices come meanwhile", async () => {
    let told: { onPayload: (p: string) => void; onLost?: () => void; onBack?: () => void } | null = null;
    const db = {
      listen: async (_channel: string, onPayload: (p: string) => void, opts?: object) => {
        told = { onPayload, ...opts };
        return async () => {};
      },
    } as unknown as Database;
    const totals = await createTotalsCache(db, { ttlMs: 60_000 });
    const keep = (key: string) => totals.set(key, { total: 1, estimated: false }, totals.mark());
    keep("a");
    expect(totals.get("a")).toEqual({ total: 1, estimated: false });

    told!.onLost!();
    expect(totals.get("a")).toBeUndefined();
    // This process's own committed write is told with an empty payload while the connection is
    // still lost: that is no sign it is back.
    told!.onPayload("");
    keep("b");
    expect(totals.get("b")).toBeUndefined();

    told!.onBack!();
    told!.onPayload("");
    keep("c");
    expect(totals.get("c")).toEqual({ total: 1, estimated: false });
    await totals.stop();
  });
});
