// Statements per REST read (issue 19): a record by id, and a page of orders with their customer
// ($expand of a foreign key), each one statement however many rows the page has: the customers
// are joined into the page's own statement, not loaded per order (nor in a batch of their own).
// Counted statement by statement with a warm session (its first request reads the session once).
// The promises each such request makes are counted too: hooks and authentication steps that have
// nothing to wait for (the usual request) return at once instead of awaiting (issue 19).
import { createHook } from "node:async_hooks";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";

/**
 * Promises per request at most (measured 43 and 47 on PostgreSQL, 112 and 116 on PGlite, whose
 * queries make more of their own). Before this round: 65 and 71, 134 and 140. Since issue 35 §4
 * every read statement passes its tenant's gate: on PostgreSQL at no promise of its own when a place
 * is free (src/ratelimit/tenant-gate.ts); on PGlite a finished statement hands the one turn over on
 * the event loop's next turn (so another tenant's request is read first), and a request's next
 * statement then waits for it: about 128 per request.
 */
const BOUND = { postgres: 55, pglite: 132 } as const;

describe.each(BACKENDS)("statements per read (%s)", (backend) => {
  const sent: string[] = [];
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: UNLIMITED_ENV,
      onStatement: (text) => sent.push(text.replace(/\s+/g, " ")),
    });
    // Orders enough for pages of 2, 10 and 25, each of one of the sample's customers.
    await t.services.db.query(
      `INSERT INTO "TB_DOC_ORD00" ("ORD_NO", "CUST_ID", "ORD_DATE", "STATUS", "TOTAL", "TREC", "CDATA", "OWNER", "TENANT_ID")
       SELECT 'S-' || g, c."CUST_ID", '20260101', 'O', g, 'N', '20260101000000', 'test', 'acme'
         FROM generate_series(1, 30) AS g
         JOIN LATERAL (SELECT "CUST_ID" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme'
                        ORDER BY "CUST_ID" OFFSET (g % 2) LIMIT 1) c ON true`,
    );
    token = await loginAs(t.app, "anna", "anna-secret-1");
    expect((await t.app.inject({ method: "GET", url: "/auth/me", headers: bearer(token) })).statusCode).toBe(
      200,
    );
  });
  afterAll(async () => t?.close());

  /** The statements one GET sent, and its body. */
  async function trace(url: string) {
    sent.length = 0;
    const res = await t.app.inject({ method: "GET", url, headers: bearer(token) });
    expect(res.statusCode).toBe(200);
    return { statements: [...sent], body: res.json() };
  }

  it("a record by id (W2): one statement", async () => {
    const { statements, body } = await trace("/api/v4/core/CUST/1?source=anag-1");
    expect(statements).toHaveLength(1);
    expect(statements[0]).toMatch(/^SELECT t\."CUST_ID", .* FROM "TB_ANAG_CUST00" AS t WHERE/);
    expect(body.data).toMatchObject({ CUST_ID: 1, CODE: "C-00001" });
  });

  it.each([2, 10, 25])(
    "the newest %i orders with their customer (W3): one statement, without and with the total",
    async (rows) => {
      for (const count of ["&$count=none", ""]) {
        const { statements, body } = await trace(
          `/api/v4/core/ORD?source=sales-1&sort=-ORD_ID&$num_rows=${rows}&$expand=CUST${count}`,
        );
        expect(statements).toHaveLength(1);
        expect(statements[0]).toContain(`FROM "TB_DOC_ORD00" AS t`);
        expect(statements[0]).toContain(`LEFT JOIN LATERAL (SELECT t."CUST_ID"`);
        expect(body.data).toHaveLength(rows);
        // Each order has its customer, the one its CUST_ID names, with the customer's fields.
        for (const order of body.data) {
          expect(order.CUST).toMatchObject({ CUST_ID: order.CUST_ID, CODE: expect.any(String) });
        }
        const ids = body.data.map((o: { ORD_ID: number }) => o.ORD_ID);
        expect(ids).toEqual([...ids].sort((a, b) => b - a));
      }
    },
  );

  /** Promises the requests to `url` make, on average (the inject harness's own included). */
  async function promisesPerRequest(url: string): Promise<number> {
    for (let i = 0; i < 5; i++) await t.app.inject({ method: "GET", url, headers: bearer(token) });
    let made = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === "PROMISE") made++;
      },
    }).enable();
    try {
      for (let i = 0; i < 20; i++) {
        const res = await t.app.inject({ method: "GET", url, headers: bearer(token) });
        expect(res.statusCode).toBe(200);
      }
    } finally {
      hook.disable();
    }
    return made / 20;
  }

  it("the usual request awaits only what waits: promises per request stay few", async () => {
    const byId = await promisesPerRequest("/api/v4/core/CUST/1?source=anag-1");
    const page = await promisesPerRequest(
      "/api/v4/core/ORD?source=sales-1&sort=-ORD_ID&$num_rows=20&$expand=CUST&$count=none",
    );
    expect(byId).toBeLessThanOrEqual(BOUND[backend]);
    expect(page).toBeLessThanOrEqual(BOUND[backend]);
  });
});
