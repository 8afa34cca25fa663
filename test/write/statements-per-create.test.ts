// Round trips of writes (issue 11): a create of a record with a template ({seq}) and a foreign
// key, a patch, and a batch, through REST with a warm session, counted statement by statement.
// On PostgreSQL, statements go out pipelined: BEGIN travels with the first statement and COMMIT
// with the outbox row. A create that is its transaction's only change is one statement (issue 19):
// its counter, the row with its key looked up, and its outbox row, sent outside BEGIN and COMMIT:
// 1 round trip. PGlite runs in the process (no network): there the statements themselves are
// counted, and a create is still BEGIN, INSERT, outbox row, COMMIT.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";

describe.each(BACKENDS)("statements per write (%s)", (backend) => {
  const sent: Array<{ text: string; pipelined: boolean }> = [];
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: UNLIMITED_ENV,
      onStatement: (text, how) => sent.push({ text: text.replace(/\s+/g, " "), pipelined: how.pipelined }),
    });
    token = await loginAs(t.app, "anna", "anna-secret-1");
    // A first request warms the session cache.
    expect((await t.app.inject({ method: "GET", url: "/auth/me", headers: bearer(token) })).statusCode).toBe(
      200,
    );
  });
  afterAll(async () => t?.close());

  const request = (method: "POST" | "PATCH", url: string, payload: Record<string, unknown>) =>
    t.app.inject({ method, url, headers: bearer(token), payload });
  /** What one request sent: each statement, "+" when it went out behind another one. */
  async function trace(run: () => Promise<{ statusCode: number }>, status: number) {
    sent.length = 0;
    const res = await run();
    expect(res.statusCode).toBe(status);
    return sent.map((s) => `${s.pipelined ? "+" : "-"} ${s.text.slice(0, 40)}`);
  }
  const roundTrips = (lines: string[]) => lines.filter((l) => l.startsWith("-")).length;

  it("a create with a template and a foreign key: 1 statement, 1 round trip on PostgreSQL", async () => {
    const lines = await trace(
      () =>
        request("POST", "/api/v4/core/CUST?source=anag-1", { data: { NAME: "Round trips", CITY_ID: "MI" } }),
      201,
    );
    // The INSERT draws the CODE template's counter and looks up the city itself.
    const insert = `WITH c0 AS (INSERT INTO "TB_SEQUENCE" ("`;
    if (backend === "postgres") {
      // No BEGIN, no COMMIT: the statement is its own transaction, the outbox row written by it.
      expect(lines).toEqual([`- ${insert}`]);
      expect(sent[0]!.text).toMatch(
        /ins AS \(INSERT INTO "TB_ANAG_CUST00".*ev AS \(INSERT INTO "TB_ANAG_OUTBOX00"/,
      );
      expect(roundTrips(lines)).toBe(1);
    } else {
      const outbox = `WITH inserted AS ( INSERT INTO "TB_ANAG_`;
      expect(lines.map((l) => l.slice(2))).toEqual(["BEGIN", insert, outbox, "COMMIT"]);
    }
    const stored = await t.services.db.query<{ CODE: string; CITY_ID: string }>(
      `SELECT "CODE", "CITY_ID" FROM "TB_ANAG_CUST00" WHERE "NAME" = 'Round trips'`,
    );
    expect(stored.rows).toEqual([{ CODE: expect.stringMatching(/^C-\d{5}$/), CITY_ID: "MI" }]);
  });

  it("a create whose templated id queries first: its row and outbox row the last statement, COMMIT right behind it", async () => {
    const lines = await trace(
      () =>
        request("POST", "/api/v4/core/PROD?source=catalog-1", {
          data: { NAME: "Templated id", UNIT_PRICE: 1 },
        }),
      201,
    );
    // The id's counter, the check that no record holds the value, then the row and its event.
    const steps = lines.filter((l) => !l.includes("pg_notify")).map((l) => l.slice(2));
    const expected =
      backend === "postgres"
        ? [
            "BEGIN",
            'INSERT INTO "TB_SEQUENCE"',
            'SELECT 1 FROM "TB_ANAG_PROD00"',
            'WITH ins AS (INSERT INTO "TB_ANAG_PROD',
            "COMMIT",
          ]
        : [
            "BEGIN",
            'INSERT INTO "TB_SEQUENCE"',
            'SELECT 1 FROM "TB_ANAG_PROD00"',
            'INSERT INTO "TB_ANAG_PROD00"',
            "WITH inserted AS (",
            "COMMIT",
          ];
    expect(steps).toHaveLength(expected.length);
    expect(steps.map((step, i) => step.startsWith(expected[i]!) || step)).toEqual(expected.map(() => true));
    if (backend === "postgres") {
      expect(lines.at(-1)).toBe("+ COMMIT");
      expect(roundTrips(lines)).toBe(3);
    }
  });

  it("a counter grown past its field: 400 naming the field, and the number is given back", async () => {
    const counter = async () =>
      (
        await t.services.db.query<{ value: string }>(
          `SELECT "VALUE"::text AS value FROM "TB_SEQUENCE" WHERE "TENANT_ID" = 'acme' AND "SEQ_NAME" = 'CUST'`,
        )
      ).rows[0]!.value;
    const before = await counter();
    // CODE is 20 characters: "C-" and 19 digits do not fit.
    await t.services.db.query(
      `UPDATE "TB_SEQUENCE" SET "VALUE" = 999999999999999999 WHERE "TENANT_ID" = 'acme' AND "SEQ_NAME" = 'CUST'`,
    );
    try {
      const res = await request("POST", "/api/v4/core/CUST?source=anag-1", { data: { NAME: "Too far" } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "CODE" });
      // What to do about it: give the field, or lengthen it or shorten the template.
      expect(res.json().message).toMatch(/give CODE in the request.*TB_VAR\.LENGTH/);
      expect(await counter()).toBe("999999999999999999");
    } finally {
      await t.services.db.query(
        `UPDATE "TB_SEQUENCE" SET "VALUE" = $1::bigint WHERE "TENANT_ID" = 'acme' AND "SEQ_NAME" = 'CUST'`,
        [before],
      );
    }
  });

  it("a key that names no record: 400 INVALID_FOREIGN_KEY, and nothing stays (row, outbox, sequence)", async () => {
    const counts = async () => {
      const { rows } = await t.services.db.query<{ cust: number; outbox: number; seq: number }>(
        `SELECT (SELECT count(*)::int FROM "TB_ANAG_CUST00") AS cust,
                (SELECT count(*)::int FROM "TB_ANAG_OUTBOX00") AS outbox,
                (SELECT coalesce(sum("VALUE"), 0)::int FROM "TB_SEQUENCE") AS seq`,
      );
      return rows[0];
    };
    const before = await counts();
    const res = await request("POST", "/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Nowhere", CITY_ID: "XX" },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CITY_ID" });
    expect(await counts()).toEqual(before);
  });

  /** Creates a customer named `name`, then traces a successful patch of it with `data`. */
  async function tracedPatch(name: string, data: Record<string, unknown>) {
    const created = await request("POST", "/api/v4/core/CUST?source=anag-1", { data: { NAME: name } });
    const id = created.json().data.CUST_ID;
    const lines = await trace(() => request("PATCH", `/api/v4/core/CUST/${id}?source=anag-1`, { data }), 200);
    // The locked read, the update, the outbox row with COMMIT.
    if (backend === "postgres") expect(roundTrips(lines)).toBe(3);
    else expect(lines).toHaveLength(5);
    return { id, lines };
  }

  it("a patch: the locked read, the update, the outbox row with COMMIT", async () => {
    await tracedPatch("To patch", { NAME: "Patched" });
  });

  it("a patch of a foreign key: looked up by the UPDATE, still 3 round trips; a missing key 400", async () => {
    const { id, lines } = await tracedPatch("Moves", { CITY_ID: "MI" });
    expect(lines.some((l) => l.includes('SELECT 1 FROM "TB_ANAG_CITY'))).toBe(false);
    // A key that names no city: refused, and the record keeps its city.
    const refused = await request("PATCH", `/api/v4/core/CUST/${id}?source=anag-1`, {
      data: { CITY_ID: "NOWHERE", NAME: "Moved away" },
    });
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: "INVALID_FOREIGN_KEY", field: "CITY_ID" });
    const stored = await t.services.db.query<{ CITY_ID: string; NAME: string }>(
      `SELECT "CITY_ID", "NAME" FROM "TB_ANAG_CUST00" WHERE "CUST_ID" = $1`,
      [id],
    );
    expect(stored.rows).toEqual([{ CITY_ID: "MI", NAME: "Moves" }]);
  });

  it("a batch of 10 creates: 1 round trip per record (savepoints and outbox rows travel with the next statement)", async () => {
    const data = Array.from({ length: 10 }, (_, i) => ({ NAME: `Batch ${i}`, CITY_ID: "RM" }));
    const lines = await trace(() => request("POST", "/api/v4/core/CUST/batch?source=anag-1", { data }), 200);
    if (backend === "postgres") expect(roundTrips(lines)).toBe(10 + 1);
    // Each record: SAVEPOINT, the insert (with its counter), outbox row, RELEASE; and BEGIN, COMMIT.
    else expect(lines).toHaveLength(4 * 10 + 2);
  });

  it("an outbox row refused by the database (sent deferred) rolls the whole write back", async () => {
    await t.services.db.exec(`
      CREATE FUNCTION refuse_marked_events() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF NEW."PAYLOAD"::text LIKE '%REFUSE-EVENT%' THEN RAISE EXCEPTION 'refused by the test'; END IF;
        RETURN NEW;
      END $$;
      CREATE TRIGGER refuse_marked_events BEFORE INSERT ON "TB_ANAG_OUTBOX00"
        FOR EACH ROW EXECUTE FUNCTION refuse_marked_events();`);
    try {
      const state = async () => {
        const { rows } = await t.services.db.query<{ named: number; seq: number; outbox: number }>(
          `SELECT (SELECT count(*)::int FROM "TB_ANAG_CUST00" WHERE "NAME" LIKE 'REFUSE-EVENT%') AS named,
                  (SELECT coalesce(sum("VALUE"), 0)::int FROM "TB_SEQUENCE") AS seq,
                  (SELECT count(*)::int FROM "TB_ANAG_OUTBOX00") AS outbox`,
        );
        return rows[0];
      };
      const before = await state();
      const one = await request("POST", "/api/v4/core/CUST?source=anag-1", {
        data: { NAME: "REFUSE-EVENT 1" },
      });
      expect(one.statusCode).toBe(500);
      expect(one.json()).toMatchObject({ code: "INTERNAL_ERROR", status: 500 });
      expect(await state()).toEqual(before);
      // A create whose templated id drew its counter first: COMMIT went behind the refused
      // statement, and rolled the transaction back (the counter's number given back).
      const templated = await request("POST", "/api/v4/core/PROD?source=catalog-1", {
        data: { NAME: "REFUSE-EVENT 3", UNIT_PRICE: 1 },
      });
      expect(templated.statusCode).toBe(500);
      expect(await state()).toEqual(before);
      const prods = await t.services.db.query(
        `SELECT 1 FROM "TB_ANAG_PROD00" WHERE "NAME" LIKE 'REFUSE-EVENT%'`,
      );
      expect(prods.rows).toEqual([]);
      // In a batch, a refused outbox row is no fault of the record's input: the batch fails whole.
      const batch = await request("POST", "/api/v4/core/CUST/batch?source=anag-1", {
        data: [{ NAME: "Kept only if all pass" }, { NAME: "REFUSE-EVENT 2" }, { NAME: "After it" }],
      });
      expect(batch.statusCode).toBe(500);
      expect(await state()).toEqual(before);
      // And the connection is usable again afterwards.
      expect(
        (await request("POST", "/api/v4/core/CUST?source=anag-1", { data: { NAME: "Fine" } })).statusCode,
      ).toBe(201);
    } finally {
      await t.services.db.exec(
        `DROP TRIGGER refuse_marked_events ON "TB_ANAG_OUTBOX00"; DROP FUNCTION refuse_marked_events();`,
      );
    }
  });
});
