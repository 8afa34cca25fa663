// Group commit of creates (issue 19, src/resolvers/write/create-groups.ts): creates of one shape
// that arrive while one is being written go to the database next, together, in one statement; a
// group the database refuses is written again create by create, so that each create gets the
// answer it would have had alone. First the grouping itself (items whose writes the test settles),
// then on PostgreSQL: concurrent creates each answered with their own row and event, and a group
// with a refused create in it.
import { once } from "node:events";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TransactionTimeoutError } from "../../src/errors.ts";
import { createGroups, type GroupedCreate } from "../../src/resolvers/write/create-groups.ts";
import { createOne } from "../../src/resolvers/write/operations.ts";
import type { Services } from "../../src/services.ts";
import { createTestServices, TEST_DATABASE_URL } from "../helpers/env.ts";
import { type PlanCounts, preparedPlans } from "../helpers/plans.ts";
import { contextFor, lastOutboxId, snapshot } from "./helpers.ts";

/** What the creates were asked to do, in order; waitFor(n) resolves once n things were asked. */
class CallLog {
  readonly entries: string[] = [];
  private waiters: Array<{ n: number; resolve: () => void }> = [];
  push(entry: string) {
    this.entries.push(entry);
    const due = this.waiters.filter((w) => this.entries.length >= w.n);
    this.waiters = this.waiters.filter((w) => this.entries.length < w.n);
    for (const w of due) w.resolve();
  }
  waitFor(n: number): Promise<void> {
    if (this.entries.length >= n) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ n, resolve }));
  }
}

/** A create whose writes (alone, or a group through it) the test settles by hand. */
class Pending {
  private settle: Array<{ resolve: (v: unknown) => void; reject: (e: unknown) => void }> = [];
  constructor(readonly name: string) {}
  item(log: CallLog): GroupedCreate<string> {
    const called = <T>(entry: string) => {
      log.push(entry);
      return new Promise<T>((resolve, reject) =>
        this.settle.push({ resolve: resolve as (v: unknown) => void, reject }),
      );
    };
    return {
      alone: () => called<string>(`alone ${this.name}`),
      together: (items) => called<string[]>(`together ${items.length} via ${this.name}`),
    };
  }
  resolve(value: unknown) {
    this.settle.shift()!.resolve(value);
  }
  reject(err: unknown) {
    this.settle.shift()!.reject(err);
  }
}

/** Lets the promise callbacks queued so far run. */
const settled = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Creates a, b and c of one shape, written in that order through groups of at most 10. */
function threeCreates(slotMs = 60_000) {
  const groups = createGroups({ maxRows: 10, slotMs });
  const log = new CallLog();
  const [a, b, c] = ["a", "b", "c"].map((n) => new Pending(n)) as [Pending, Pending, Pending];
  const written = [a, b, c].map((p) => groups.write("s", p.item(log))) as [
    Promise<string>,
    Promise<string>,
    Promise<string>,
  ];
  return { log, a, b, c, written };
}

describe("create groups", () => {
  it("the first create goes alone at once; those that arrive while it is out go next, in one statement", async () => {
    const groups = createGroups({ maxRows: 3, slotMs: 60_000 });
    const log = new CallLog();
    const [a, b, c, d, e] = ["a", "b", "c", "d", "e"].map((n) => new Pending(n)) as [
      Pending,
      Pending,
      Pending,
      Pending,
      Pending,
    ];
    const [ra, rb, rc, rd, re] = [a, b, c, d, e].map((p) => groups.write("s", p.item(log)));
    // Another shape does not wait for this one's.
    const other = new Pending("x");
    const rx = groups.write("t", other.item(log));
    expect(log.entries).toEqual(["alone a", "alone x"]);
    a.resolve("A");
    await settled();
    expect(await ra).toBe("A");
    // At most maxRows together, through the first of them.
    expect(log.entries).toEqual(["alone a", "alone x", "together 3 via b"]);
    b.resolve(["B", "C", "D"]);
    expect([await rb, await rc, await rd]).toEqual(["B", "C", "D"]);
    await settled();
    // The one left over goes alone.
    expect(log.entries.slice(3)).toEqual(["alone e"]);
    e.resolve("E");
    other.resolve("X");
    expect([await re, await rx]).toEqual(["E", "X"]);
  });

  it("a group the database refuses (a SQLSTATE) is written again create by create, each with its own answer", async () => {
    const { log, a, b, c, written } = threeCreates();
    a.resolve("A");
    await log.waitFor(2);
    b.reject(Object.assign(new Error("duplicate key"), { code: "23505" }));
    await log.waitFor(4);
    expect(log.entries).toEqual(["alone a", "together 2 via b", "alone b", "alone c"]);
    b.resolve("B");
    c.reject(Object.assign(new Error("duplicate key"), { code: "23505" }));
    expect(await written[0]).toBe("A");
    expect(await written[1]).toBe("B");
    await expect(written[2]).rejects.toMatchObject({ code: "23505" });
  });

  it.each([
    ["the connection ended", new Error("Connection terminated unexpectedly")],
    ["the socket reset", Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" })],
  ])(
    "a group whose statement got no answer (%s) is not written again: each create fails",
    async (_, lost) => {
      const { log, a, b, written } = threeCreates();
      a.resolve("A");
      await log.waitFor(2);
      b.reject(lost);
      await expect(written[1]).rejects.toBe(lost);
      await expect(written[2]).rejects.toBe(lost);
      expect(await written[0]).toBe("A");
      expect(log.entries).toEqual(["alone a", "together 2 via b"]);
    },
  );

  it("a group whose statement was never sent (the first create's deadline had passed) is written create by create", async () => {
    const { log, a, b, c, written } = threeCreates();
    a.resolve("A");
    await log.waitFor(2);
    b.reject(new TransactionTimeoutError(30_000));
    await log.waitFor(4);
    expect(log.entries).toEqual(["alone a", "together 2 via b", "alone b", "alone c"]);
    b.reject(new TransactionTimeoutError(30_000));
    c.resolve("C");
    await expect(written[1]).rejects.toMatchObject({ status: 504 });
    expect(await written[2]).toBe("C");
  });

  it("a statement out longer than slotMs no longer holds its shape: the next group goes", async () => {
    const { log, a, b, written } = threeCreates(30);
    // a is stuck (a lock): once its turn is over, b and c go without it.
    await log.waitFor(2);
    expect(log.entries).toEqual(["alone a", "together 2 via b"]);
    b.resolve(["B", "C"]);
    expect([await written[1], await written[2]]).toEqual(["B", "C"]);
    a.resolve("A");
    expect(await written[0]).toBe("A");
  });
});

/**
 * How PostgreSQL planned the customers' create statements so far, summed over the idle connections
 * of the service's pool (pg_prepared_statements is per session: each connection is asked).
 */
/** Connections of the pool held (not idle) right now: a LISTEN connection, a probe in flight. */
function held(services: Services): number {
  if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
  return services.db.pool.totalCount - services.db.pool.idleCount;
}

/** `heldBefore`: held() before the creates, so that every connection they ran on is idle again. */
async function createPlans(services: Services, heldBefore: number): Promise<PlanCounts> {
  if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
  const { pool } = services.db;
  // The idle connections, once no more are held than before the creates: a create ran on any of
  // them, and a periodic statement (the watchdog's probe) may hold one for a moment.
  while (pool.totalCount - pool.idleCount > heldBefore) await once(pool, "release");
  const clients = await Promise.all(Array.from({ length: pool.idleCount }, () => pool.connect()));
  const sum = { generic: 0, custom: 0 };
  try {
    for (const client of clients) {
      const plans = await preparedPlans(
        { query: async (text, params) => client.query(text, params as unknown[]) as never },
        'WITH %INSERT INTO "TB_ANAG_CUST00"%',
      );
      sum.generic += plans.generic;
      sum.custom += plans.custom;
    }
  } finally {
    for (const client of clients) client.release();
  }
  return sum;
}

if (TEST_DATABASE_URL)
  describe("create groups on PostgreSQL", () => {
    let services: Services;
    const sent: string[] = [];
    const anna = contextFor("anna", "anag-1");
    beforeAll(async () => {
      services = await createTestServices("postgres", {
        fixture: "sample",
        // pg_prepared_statements is per session: not through a PgBouncer.
        databaseDirect: true,
        onStatement: (text) => sent.push(text.replace(/\s+/g, " ")),
      });
    });
    afterAll(async () => services?.close());

    /** Statements that wrote several records of `table` at once. */
    const groupStatements = (table = "TB_ANAG_CUST00") =>
      sent.filter(
        (s) => s.startsWith(`WITH ins AS (INSERT INTO "${table}" `) && /\bVALUES \(.*\), \(/.test(s),
      );

    it("40 creates at once: fewer statements than creates, each create answered with its own row and its own event", async () => {
      sent.length = 0;
      const heldBefore = held(services);
      const names = Array.from({ length: 40 }, (_, i) => `Grouped ${i}`);
      const created = await Promise.all(
        names.map((NAME, i) =>
          createOne(services, anna, "CUST", { NAME, CODE: `G-${i}`, CITY_ID: i % 2 ? "MI" : "RM" }),
        ),
      );
      expect(groupStatements().length).toBeGreaterThan(0);
      const statements = sent.filter((s) => s.includes('INSERT INTO "TB_ANAG_CUST00"'));
      expect(statements.length).toBeLessThan(40);
      // Each statement ran with a generic plan (src/db/connection.ts): PostgreSQL's own count, on
      // every connection of the pool (each session has its prepared statements).
      const plans = await createPlans(services, heldBefore);
      expect(plans.custom).toBe(0);
      expect(plans.generic).toBe(statements.length);
      const { rows } = await services.db.query<{
        CUST_ID: number;
        NAME: string;
        CODE: string;
        CITY_ID: string;
      }>(`SELECT "CUST_ID", "NAME", "CODE", "CITY_ID" FROM "TB_ANAG_CUST00" WHERE "NAME" LIKE 'Grouped %'`);
      const stored = new Map(rows.map((r) => [r.NAME, r]));
      expect(stored.size).toBe(40);
      const events = await services.db.query<{ OUTBOX_ID: string; AGGREGATE_ID: string; NAME: string }>(
        `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID", "AGGREGATE_ID", "PAYLOAD"->>'NAME' AS "NAME"
         FROM "TB_ANAG_OUTBOX00" WHERE "PAYLOAD"->>'NAME' LIKE 'Grouped %'`,
      );
      const eventOf = new Map(events.rows.map((e) => [e.OUTBOX_ID, e]));
      expect(eventOf.size).toBe(40);
      created.forEach((outcome, i) => {
        const row = stored.get(names[i]!)!;
        // Its own row: the id, and the values it sent.
        expect(outcome.recordId).toBe(row.CUST_ID);
        expect(outcome.visible).toMatchObject({ CUST_ID: row.CUST_ID, NAME: names[i], CODE: `G-${i}` });
        expect(row).toMatchObject({ CODE: `G-${i}`, CITY_ID: i % 2 ? "MI" : "RM" });
        // Its own event: the row's id and values.
        expect(eventOf.get(String(outcome.eventId))).toEqual({
          OUTBOX_ID: String(outcome.eventId),
          AGGREGATE_ID: String(row.CUST_ID),
          NAME: names[i],
        });
      });
    });

    it("a group with creates the database refuses: those get their own error, the others are written, nothing else stays", async () => {
      const before = await snapshot(services);
      const last = await lastOutboxId(services);
      sent.length = 0;
      // Creates of one shape (NAME, CODE, CITY_ID): every fifth names a city that does not exist.
      const outcomes = await Promise.allSettled(
        Array.from({ length: 30 }, (_, i) =>
          createOne(services, anna, "CUST", {
            NAME: `Refused ${i}`,
            CODE: `R-${i}`,
            CITY_ID: i % 5 ? "MI" : "XX",
          }),
        ),
      );
      expect(groupStatements().length).toBeGreaterThan(0);
      outcomes.forEach((outcome, i) => {
        if (i % 5)
          expect(outcome).toMatchObject({
            status: "fulfilled",
            value: { visible: { NAME: `Refused ${i}` } },
          });
        else
          expect(outcome).toMatchObject({
            status: "rejected",
            reason: { status: 400, code: "INVALID_FOREIGN_KEY", field: "CITY_ID" },
          });
      });
      const { rows } = await services.db.query<{ NAME: string }>(
        `SELECT "NAME" FROM "TB_ANAG_CUST00" WHERE "NAME" LIKE 'Refused %' ORDER BY "CUST_ID"`,
      );
      const written = Array.from({ length: 30 }, (_, i) => i).filter((i) => i % 5);
      expect(rows.map((r) => r.NAME).sort()).toEqual(written.map((i) => `Refused ${i}`).sort());
      const events = await services.db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" > $1`,
        [last],
      );
      expect(events.rows[0]!.n).toBe(written.length);
      // Apart from the customers written and their events, nothing changed (the counters included).
      const rest = ({ TB_ANAG_CUST00: _c, TB_ANAG_OUTBOX00: _o, ...others }: Record<string, unknown[]>) =>
        others;
      expect(rest(await snapshot(services))).toEqual(rest(before));
    });

    it("creates of several shapes at once (other columns, a key looked up or not): each group one shape, each row its own values", async () => {
      sent.length = 0;
      // Shapes interleaved: a group may only hold creates whose statements are the same. EMAIL and
      // NOTES are as many columns of text: mixed in one group, a value would land in the other's
      // column without an error to fall back on. The order of a request's fields is not a shape.
      const shapes: Array<(i: number) => Record<string, unknown>> = [
        (i) => ({ NAME: `Mixed ${i}`, CODE: `M-${i}`, EMAIL: `m${i}@example.com` }),
        (i) => ({ NAME: `Mixed ${i}`, CODE: `M-${i}`, NOTES: `note ${i}` }),
        (i) => ({ CODE: `M-${i}`, EMAIL: `m${i}@example.com`, NAME: `Mixed ${i}` }),
        (i) => ({ NAME: `Mixed ${i}`, CODE: `M-${i}`, CITY_ID: "MI" }),
      ];
      const data = Array.from({ length: 50 }, (_, i) => shapes[i % shapes.length]!(i));
      const created = await Promise.all(data.map((d) => createOne(services, anna, "CUST", d)));
      expect(groupStatements().length).toBeGreaterThan(0);
      const { rows } = await services.db.query<{
        CUST_ID: number;
        NAME: string;
        CODE: string;
        CITY_ID: string | null;
        EMAIL: string | null;
        NOTES: string | null;
      }>(
        `SELECT "CUST_ID", "NAME", "CODE", "CITY_ID", "EMAIL", "NOTES"
           FROM "TB_ANAG_CUST00" WHERE "NAME" LIKE 'Mixed %'`,
      );
      const stored = new Map(rows.map((r) => [r.NAME, r]));
      expect(stored.size).toBe(50);
      data.forEach((d, i) => {
        expect(stored.get(`Mixed ${i}`)).toEqual({
          CUST_ID: created[i]!.recordId,
          NAME: `Mixed ${i}`,
          CODE: `M-${i}`,
          CITY_ID: d.CITY_ID ?? null,
          EMAIL: d.EMAIL ?? null,
          NOTES: d.NOTES ?? null,
        });
      });
    });

    it("a duplicate id in a group: 409 for that create alone, the others written", async () => {
      sent.length = 0;
      const outcomes = await Promise.allSettled(
        ["DG1", "DG2", "MI", "DG3", "DG4", "DG5", "DG6"].map((CITY_ID) =>
          createOne(services, contextFor("anna", "erp"), "CITY", {
            CITY_ID,
            NAME: `Dup ${CITY_ID}`,
            COUNTRY: "IT",
          }),
        ),
      );
      expect(outcomes.map((o) => o.status)).toEqual([
        "fulfilled",
        "fulfilled",
        "rejected",
        "fulfilled",
        "fulfilled",
        "fulfilled",
        "fulfilled",
      ]);
      expect(outcomes[2]).toMatchObject({ reason: { status: 409, code: "DUPLICATE_KEY" } });
      expect(groupStatements("TB_ANAG_CITY00").length).toBeGreaterThan(0);
      const { rows } = await services.db.query<{ CITY_ID: string; NAME: string }>(
        `SELECT "CITY_ID", "NAME" FROM "TB_ANAG_CITY00"
        WHERE "TENANT_ID" = $1 AND "CITY_ID" IN ('DG1', 'DG2', 'DG3', 'DG4', 'DG5', 'DG6', 'MI') ORDER BY 1`,
        [anna.principal.tenantId],
      );
      expect(rows.map((r) => `${r.CITY_ID} ${r.NAME}`)).toEqual([
        "DG1 Dup DG1",
        "DG2 Dup DG2",
        "DG3 Dup DG3",
        "DG4 Dup DG4",
        "DG5 Dup DG5",
        "DG6 Dup DG6",
        "MI Milano",
      ]);
    });
    it("CREATE_GROUP_MAX_ROWS=1: every create is written alone", async () => {
      const statements: string[] = [];
      const alone = await createTestServices("postgres", {
        fixture: "sample",
        databaseDirect: true,
        env: { CREATE_GROUP_MAX_ROWS: "1" },
        onStatement: (text) => statements.push(text),
      });
      try {
        expect(alone.creates).toBeNull();
        statements.length = 0;
        await Promise.all(
          Array.from({ length: 10 }, (_, i) =>
            createOne(alone, anna, "CUST", { NAME: `Alone ${i}`, CODE: `A-${i}`, CITY_ID: "MI" }),
          ),
        );
        const inserts = statements.filter((s) => s.includes('INSERT INTO "TB_ANAG_CUST00"'));
        expect(inserts).toHaveLength(10);
      } finally {
        await alone.close();
      }
    });
  });
