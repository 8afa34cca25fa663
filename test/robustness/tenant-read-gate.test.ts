// One tenant's reads, REST's and GraphQL's together, run at most GRAPHQL_TENANT_STATEMENTS
// statements at a time in a process (issue 35 §4, src/ratelimit/tenant-gate.ts): tenant A's
// lists, counts, groups, records, lookups, named sorts, documents and GraphQL fields wait in A's
// gate while A's statements are held at the database, and tenant B's GET does not wait for them:
// on PostgreSQL it goes straight through; on the embedded database, where the gate also gives the
// database to GATE read statements at a time by turns between tenants, B's statement takes the
// first turn that ends, ahead of A's waiting ones. The test holds every statement of A on a
// dimension table before it reaches the database and counts how many of them are there at once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../events/support.ts";
import { bearer, loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";

const GATE = 2;

/** dimensio_tenant_read_statements{state} from /metrics. */
async function gateGauge(t: TestApp, state: "running" | "waiting"): Promise<number> {
  const text = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
  const line = text
    .split("\n")
    .find((l) => l.startsWith("dimensio_tenant_read_statements{") && l.includes(`state="${state}"`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : Number.NaN;
}

for (const backend of BACKENDS)
  describe(`one read gate per tenant for REST and GraphQL (${backend})`, () => {
    let t: TestApp;
    const tokens: Record<string, string> = {};
    /** Tenant A's statements on dimension tables: at the database now, most at once, held while `held`. */
    const acme = { atDatabase: 0, most: 0, held: false };
    /** What lets each held statement of A go on, in order of arrival. */
    const holds: Array<() => void> = [];
    const releaseOne = () => holds.shift()?.();
    const open = () => {
      acme.held = false;
      for (const release of holds.splice(0)) release();
    };

    beforeAll(async () => {
      t = await createTestApp(backend, {
        fixture: "sample",
        env: { ...UNLIMITED_ENV, GRAPHQL_TENANT_STATEMENTS: String(GATE) },
      });
      tokens.anna = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
      tokens.greta = await loginAs(t.app, SAMPLE_USERS.greta.username, SAMPLE_USERS.greta.password);
      const tables = [...t.services.metadata.current().dimensions.values()].map((d) => `"${d.tableName}"`);
      // The gate calls readDb.query when a statement's turn comes (readDb is the handle itself here).
      expect(t.services.readDb).toBe(t.services.db);
      const query = t.services.db.query;
      t.services.db.query = (async (text: string, params?: readonly unknown[], ...rest: unknown[]) => {
        const ours = params?.includes("acme") === true && tables.some((table) => text.includes(table));
        if (!ours) return (query as (...a: unknown[]) => Promise<unknown>)(text, params, ...rest);
        acme.most = Math.max(acme.most, ++acme.atDatabase);
        try {
          if (acme.held) await new Promise<void>((resolve) => holds.push(resolve));
          return await (query as (...a: unknown[]) => Promise<unknown>)(text, params, ...rest);
        } finally {
          acme.atDatabase--;
        }
      }) as typeof query;
    }, 60_000);

    afterAll(async () => {
      open();
      await t?.close();
    });

    const get = (who: string, url: string) =>
      t.app.inject({ method: "GET", url, headers: bearer(tokens[who]!) });

    it("queues tenant A's REST and GraphQL reads in A's gate while B's GET goes through", async () => {
      const firstOfA = (await get("anna", "/api/v4/core/CUST?source=anag-1&$num_rows=1")).json().data[0];
      const theirs = (await get("greta", "/api/v4/core/CUST?source=anag-1&$num_rows=1")).json().data[0];
      expect(firstOfA.CUST_ID).toBeDefined();
      expect(theirs.CUST_ID).toBeDefined();

      acme.held = true;
      acme.most = 0;
      const reads = {
        list: get("anna", "/api/v4/core/CUST?source=anag-1&$num_rows=5"),
        count: get("anna", "/api/v4/core/CUST/count?source=anag-1"),
        group: get("anna", "/api/v4/core/CUST?source=anag-1&$group=CITY_ID"),
        record: get("anna", `/api/v4/core/CUST/${firstOfA.CUST_ID}?source=anag-1`),
        lookup: get("anna", "/api/v4/core/vars?source=anag-1&field=CITY_ID&getACList=1"),
        namedSort: get("anna", "/api/v4/core/CUST/sort/by_name?source=anag-1&$num_rows=5"),
        document: get("anna", "/api/v4/document/listino/P0001?source=catalog-1"),
        graphql: t.app.inject({
          method: "POST",
          url: "/graphql",
          headers: { ...bearer(tokens.anna!), "content-type": "application/json" },
          payload: { query: '{ CUST(source: "anag-1", limit: 5) { data { NAME } } }' },
        }),
      };
      let answeredOfA = 0;
      for (const read of Object.values(reads))
        void read.then(() => {
          answeredOfA++;
        });
      // Every one of the eight reached A's gate (the $group, heavy, through A's heavy lane, where it
      // is alone): GATE statements at the database, the rest waiting.
      await eventually(
        async () => (await gateGauge(t, "running")) === GATE && (await gateGauge(t, "waiting")) >= 8 - GATE,
        { what: "tenant A's reads in its gate" },
      );
      expect(acme.atDatabase).toBe(GATE);

      // Tenant B's cheap GET does not wait for A's gate. On PostgreSQL it goes straight through;
      // on the embedded database A's held statements have both turns, and B's takes the first that
      // one of them gives back, ahead of A's waiting ones.
      let answered = false;
      const pending = get("greta", `/api/v4/core/CUST/${theirs.CUST_ID}?source=anag-1`).then((res) => {
        answered = true;
        return res;
      });
      let released = 0;
      if (backend === "pglite") {
        await eventually(async () => (await gateGauge(t, "running")) === GATE + 1, {
          what: "B's statement waiting for a turn",
        });
        expect(answered).toBe(false);
        releaseOne();
        released++;
      }
      const cheap = await pending;
      expect(cheap.statusCode).toBe(200);
      expect(cheap.json().data).toMatchObject({ CUST_ID: theirs.CUST_ID, NAME: "Huber GmbH" });
      // B waited for none of A's reads (PostgreSQL), or for one of A's statements (PGlite): at
      // most the read that statement belonged to has answered.
      expect(answeredOfA).toBeLessThanOrEqual(released);
      expect(await gateGauge(t, "waiting")).toBeGreaterThan(0);

      // Opened: all of A's reads answer, and never more than GATE of them were at the database.
      open();
      const answers = Object.fromEntries(
        await Promise.all(Object.entries(reads).map(async ([name, r]) => [name, await r] as const)),
      );
      for (const [name, res] of Object.entries(answers)) expect([name, res.statusCode]).toEqual([name, 200]);
      expect(answers.list!.json().data).toHaveLength(4);
      expect(answers.count!.json().count).toBe(4);
      expect(answers.group!.json().data.length).toBe(3);
      expect(answers.record!.json().data.CUST_ID).toBe(firstOfA.CUST_ID);
      expect(answers.lookup!.json().length).toBeGreaterThan(0);
      expect(answers.namedSort!.json().data.map((r: { NAME: string }) => r.NAME)).toEqual([
        "Bianchi SpA",
        "Neri Trasporti",
        "Rossi Srl",
        "Verdi & Figli",
      ]);
      expect(answers.document!.json().data).toMatchObject({ PROD_ID: "P0001" });
      expect(answers.graphql!.json().errors).toBeUndefined();
      expect(answers.graphql!.json().data.CUST.data).toHaveLength(4);
      expect(acme.most).toBe(GATE);
      await eventually(
        async () => (await gateGauge(t, "running")) === 0 && (await gateGauge(t, "waiting")) === 0,
        { what: "the gate to empty" },
      );
    }, 60_000);
  });
