// Totals kept until a write commits (src/resolvers/read/totals-cache.ts, issue 19): the next page
// of the same filter and a repeated count send no count; a write forgets the kept totals of the
// dimensions (of its tenant) it wrote, cascaded ones included, and no other, in the writing
// process before its answer, and in another process of the same database when the database's
// notice arrives. A notice that names nothing forgets everything. A full-text search's totals are
// always counted.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.ts";
import { openPostgres } from "../../src/db/database.ts";
import { createLogger } from "../../src/logger.ts";
import { outboxNoticeItem, outboxNoticeItems } from "../../src/events/outbox.ts";
import type { CountScope } from "../../src/query/types.ts";
import { createTotalsCache } from "../../src/resolvers/read/totals-cache.ts";
import { openServices, type Services } from "../../src/services.ts";
import type { Database } from "../../src/types.ts";
import { eventually } from "../events/support.ts";
import { bearer, loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";

const LIST = "/api/v4/core/CUST?source=anag-1&$num_rows=2";
const COUNT = "/api/v4/core/CUST/count?source=anag-1";
const ADDR_COUNT = "/api/v4/core/ADDR/count?source=anag-2";
const CITY_COUNT = "/api/v4/core/CITY/count?source=anag-3";

describe.each(BACKENDS)("totals kept until a write (%s)", (backend) => {
  let t: TestApp;
  let token: string;
  let globexToken: string;
  const statements: string[] = [];

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: UNLIMITED_ENV,
      onStatement: (text) => statements.push(text),
    });
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    globexToken = await loginAs(t.app, SAMPLE_USERS.greta.username, SAMPLE_USERS.greta.password);
  }, 60_000);
  afterAll(async () => t?.close());

  /** The answer's body, and the statements the request sent (as anna of acme, or `as`). */
  async function call(method: "GET" | "POST" | "DELETE", url: string, payload?: unknown, as = token) {
    statements.length = 0;
    const res = await t.app.inject({ method, url, headers: bearer(as), ...(payload ? { payload } : {}) });
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

  it("a write forgets the totals of its tenant's dimension only: another tenant's and dimension's stay", async () => {
    const count = async (url: string, as = token) => {
      const { body, sent } = await call("GET", url, undefined, as);
      return { count: body.count as number, counted: counting(sent) };
    };
    const cust = (await count(COUNT)).count;
    const city = (await count(CITY_COUNT)).count;
    const globexCust = (await count(COUNT, globexToken)).count;
    // Kept: asked again, none is counted.
    expect(await count(COUNT)).toEqual({ count: cust, counted: false });
    expect(await count(CITY_COUNT)).toEqual({ count: city, counted: false });
    expect(await count(COUNT, globexToken)).toEqual({ count: globexCust, counted: false });

    // acme writes a CUST (one statement on PostgreSQL): acme's CUST total is counted again, acme's
    // CITY total and globex's CUST total are still kept (no statement at all).
    const created = await call("POST", "/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Scoped Srl", CITY_ID: "MI" },
    });
    expect(await count(COUNT)).toEqual({ count: cust + 1, counted: true });
    const cityAgain = await call("GET", CITY_COUNT);
    expect(cityAgain.sent).toHaveLength(0);
    expect(cityAgain.body.count).toBe(city);
    const globexAgain = await call("GET", COUNT, undefined, globexToken);
    expect(globexAgain.sent).toHaveLength(0);
    expect(globexAgain.body.count).toBe(globexCust);

    // A write that cascades (a CUST's delete deletes its ADDR): both dimensions' totals are
    // counted again, CITY's still kept.
    const id = created.body.data.CUST_ID;
    await call("POST", "/api/v4/core/ADDR?source=anag-2", {
      data: { CUST_ID: id, KIND: "BILL", CITY_ID: "RM" },
    });
    // Kept again once this process has heard its own NOTIFY of each write too (on PostgreSQL it
    // arrives a little after the commit, and forgets the written dimension's totals once more).
    const settled = (url: string) =>
      eventually(async () => {
        const { count: n, counted } = await count(url);
        return !counted && n;
      });
    const addr = await settled(ADDR_COUNT);
    expect(await settled(COUNT)).toBe(cust + 1);
    await call("DELETE", `/api/v4/core/CUST/${id}?source=anag-1`);
    expect(await count(ADDR_COUNT)).toEqual({ count: addr - 1, counted: true });
    expect(await count(COUNT)).toEqual({ count: cust, counted: true });
    expect(await count(CITY_COUNT)).toEqual({ count: city, counted: false });
  });
});

// Another process of the same database: its kept totals go when the write's notice arrives, those
// of the dimension (of the tenant) written and no other.
describe.each(BACKENDS.filter((b) => b === "postgres"))("totals in another process (%s)", (backend) => {
  let t: TestApp;
  let other: Services;
  let otherApp: Awaited<ReturnType<typeof buildApp>>;
  let token: string;
  let otherToken: string;
  let otherGlobexToken: string;
  const otherStatements: string[] = [];

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: UNLIMITED_ENV });
    if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
    other = await openServices(t.services.config, {
      db: openPostgres(t.services.db.connectionString, {
        max: 4,
        onStatement: (text) => otherStatements.push(text),
      }),
      logger: createLogger("silent"),
    });
    otherApp = await buildApp(other);
    await otherApp.ready();
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    otherToken = await loginAs(otherApp, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    otherGlobexToken = await loginAs(otherApp, SAMPLE_USERS.greta.username, SAMPLE_USERS.greta.password);
  }, 60_000);
  afterAll(async () => {
    await otherApp?.close();
    await other?.close();
    await t?.close();
  });

  /** The other process's answer to `url`, and whether it counted (sent a count). */
  async function there(url: string, as = otherToken) {
    otherStatements.length = 0;
    const res = await otherApp.inject({ method: "GET", url, headers: bearer(as) });
    expect(res.statusCode, res.body).toBe(200);
    // biome-ignore lint/suspicious/noExplicitAny: bodies are inspected freely
    const body = res.json() as any;
    return {
      total: (body.meta?.total ?? body.count) as number,
      counted: otherStatements.some((s) => /count\(\*\)/i.test(s)),
    };
  }

  it("a create in one process: the other counts that total again once the notice is in, and only it", async () => {
    const before = (await there(LIST)).total;
    const city = (await there(CITY_COUNT)).total;
    const globex = (await there(LIST, otherGlobexToken)).total;
    expect(await there(LIST)).toEqual({ total: before, counted: false });
    expect(other.totals.size()).toBe(3);
    const created = await t.app.inject({
      method: "POST",
      url: "/api/v4/core/CUST?source=anag-1",
      headers: bearer(token),
      payload: { data: { NAME: "Elsewhere Srl", CITY_ID: "RM" } },
    });
    expect(created.statusCode).toBe(201);
    await eventually(() => other.totals.size() === 2, {
      what: "the other process to forget acme's CUST total",
    });
    expect(await there(CITY_COUNT)).toEqual({ total: city, counted: false });
    expect(await there(LIST, otherGlobexToken)).toEqual({ total: globex, counted: false });
    expect(await there(LIST)).toEqual({ total: before + 1, counted: true });
  });
});

// The payloads the cache is told, through the Database's listen: what they name, and the fallback.
describe("totals forgotten by what a notice names", () => {
  /** A key as the resolvers make them (countKey), with the scope they pass along with it. */
  const keyOf = (tenantId: string, dim: string) => `count of ${dim} of ${tenantId}`;
  const scopeOf = new Map<string, CountScope>(
    ["acme/CUST", "acme/CITY", "globex/CUST"].map((s) => {
      const [tenantId, dim] = s.split("/") as [string, string];
      return [keyOf(tenantId, dim), { tenantId, dim }];
    }),
  );

  async function cacheTold() {
    let onPayload: (p: string) => void = () => {};
    const db = {
      listen: async (_channel: string, told: (p: string) => void) => {
        onPayload = told;
        return async () => {};
      },
    } as unknown as Database;
    const totals = await createTotalsCache(db, { ttlMs: 60_000 });
    // "odd key": a total kept without its scope.
    const keep = (key: string, mark = totals.mark()) =>
      totals.set(key, { total: 1, estimated: false }, mark, scopeOf.get(key));
    return { totals, keep, tell: (p: string) => onPayload(p) };
  }

  it("forgets the named scopes' totals; an empty, unknown or malformed payload forgets all", async () => {
    const { totals, keep, tell } = await cacheTold();
    const all = [keyOf("acme", "CUST"), keyOf("acme", "CITY"), keyOf("globex", "CUST"), "odd key"];
    const kept = () => all.filter((k) => totals.get(k) !== undefined);
    for (const k of all) keep(k);
    expect(kept()).toEqual(all);
    // A key of no known scope goes with any write; the others only with their own scope's.
    tell(outboxNoticeItem("acme", "CUST"));
    expect(kept()).toEqual([keyOf("acme", "CITY"), keyOf("globex", "CUST")]);
    tell([outboxNoticeItem("acme", "CITY"), outboxNoticeItem("globex", "ORD")].join("\n"));
    expect(kept()).toEqual([keyOf("globex", "CUST")]);
    for (const payload of ["", "garbage", `${outboxNoticeItem("globex", "ORD")}\n["x"]`]) {
      for (const k of all) keep(k);
      expect(kept()).toHaveLength(4);
      tell(payload);
      expect(kept(), payload).toEqual([]);
    }
    await totals.stop();
  });

  it("reads a payload's items as outboxNoticeItem writes them, plain or escaped; any other spelling names none", () => {
    const plain = outboxNoticeItem("acme", "CUST");
    const escaped = outboxNoticeItem('te"n\\ant', "DIM\u0001");
    expect(outboxNoticeItems([plain, escaped].join("\n"))).toEqual([plain, escaped]);
    for (const odd of [
      '["acme", "CUST"]',
      '["\\u0061cme","CUST"]',
      '["acme","CUST","x"]',
      '["acme",1]',
      '{"acme":"CUST"}',
      '["acme\u0001","CUST"]',
    ]) {
      expect(outboxNoticeItems(`${plain}\n${odd}`), odd).toBeNull();
    }
  });

  it("does not keep a total counted across a write to its scope; another scope's write does not matter", async () => {
    const { totals, keep, tell } = await cacheTold();
    const mark = totals.mark();
    tell(outboxNoticeItem("acme", "CUST"));
    keep(keyOf("acme", "CUST"), mark);
    keep(keyOf("acme", "CITY"), mark);
    keep("odd key", mark);
    expect(totals.get(keyOf("acme", "CUST"))).toBeUndefined();
    expect(totals.get(keyOf("acme", "CITY"))).toEqual({ total: 1, estimated: false });
    expect(totals.get("odd key")).toBeUndefined();
    await totals.stop();
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
