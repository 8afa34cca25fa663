// Search follows field visibility (decisions.md, "Search follows field visibility"): a field hidden
// by a weight (TB_COST.COD_UTENTE, spec decisions §6) behaves as if its flags were absent, so no
// search matches on its words, from the moment the change commits, although the index rows were
// built when the field was searchable; the metadata event then rebuilds the dimension's rows, and
// the field's words are found again once the weight is lifted (those written while it was hidden
// included), in every database (a tenant on a database profile). A field hidden in a CENTER_DETT
// context is not searchable either. What a dimension's rows were last rebuilt from is kept in the
// database (TB_SEARCH_FIELDS): a restarted indexer rebuilds nothing for a metadata event that
// changes no searchable field.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import type { ReceivedEvent } from "../../src/events/bus.ts";
import { outboxRowToEvent } from "../../src/events/relay.ts";
import { createSearchIndexer, rebuildSearchIndex } from "../../src/events/search.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";
import { sampleFixture } from "../read/support.ts";
import { createProfileDatabase, type ProfileDatabase, sampleWithGlobexOn } from "../tenants/helpers.ts";
import { type Client, client, NO_RATE_LIMITS } from "../write/http.ts";
import { eventually } from "./support.ts";

/** The sample, with CUST.EMAIL (searchable by default) weighted 2 in lucia's center MI01. */
function fixture() {
  const f = sampleFixture();
  f.TB_COST.push({
    COD_DIM: "CUST",
    NUM_COST: 102,
    COD_VAR: "EMAIL",
    COD_ON_OFF: "DNMR",
    REQUIRED: false,
    RENDER_HINT: "email",
    GROUP_NAME: "contact",
    VALUE_TEMP: null,
    COD_UTENTE: 2,
    CENTER_DETT: "MI01",
  });
  return f;
}

describe.each(BACKENDS)("search and field visibility (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let lucia: Client;
  let luciaToken: string;
  let runtime: EventRuntime;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: fixture(),
      env: { ...NO_RATE_LIMITS, EVENTS_POLL_MS: "60000" },
    });
    anna = client(t.app, await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password));
    luciaToken = await loginAs(t.app, SAMPLE_USERS.lucia.username, SAMPLE_USERS.lucia.password);
    lucia = client(t.app, luciaToken);
    runtime = await startEventRuntime(t.services, { relay: true, subscribers: true });
  });
  afterAll(async () => {
    await runtime?.stop();
    await t?.close();
  });

  const search = (c: Client, words: string) =>
    c.get(`/api/v4/core/CUST?source=anag-1&$search=${encodeURIComponent(words)}`);
  const ids = async (c: Client, words: string) => {
    const res = await search(c, words);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return (res.body.data as Array<{ CUST_ID: number }>).map((r) => r.CUST_ID).sort((a, b) => a - b);
  };
  /** A customer created, then given `changes` (SALES_REP is M, not N: set by an update). */
  const create = async (
    data: Record<string, unknown>,
    changes?: Record<string, unknown>,
  ): Promise<number> => {
    const res = await anna.post("/api/v4/core/CUST?source=anag-1", { data });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const id: number = res.body.data.CUST_ID;
    if (changes) {
      const patched = await anna.patch(`/api/v4/core/CUST/${id}?source=anag-1`, { data: changes });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    }
    return id;
  };
  /** The record's index text, once its row is there (and `holds` says so, when given). */
  const indexText = (id: number, holds: (text: string) => boolean = () => true) =>
    eventually(
      async () => {
        const { rows } = await t.services.db.query<{ TEXT: string }>(
          `SELECT "TEXT" FROM "TB_SEARCH" WHERE "TENANT_ID" = 'acme' AND "DIMENSION" = 'CUST' AND "RECORD_ID" = $1`,
          [String(id)],
        );
        return rows[0] && holds(rows[0].TEXT) ? rows[0].TEXT : undefined;
      },
      { what: `the index row of CUST ${id}` },
    );
  const weighSalesRep = async (weight: number | null) => {
    const res = await anna.patch("/api/v4/core/COST/CUST/10?source=erp", { data: { COD_UTENTE: weight } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
  };

  it("a field weighted after its words were indexed matches no search; they are found again once the weight goes", async () => {
    const before = await create({ NAME: "Harbour Traders" }, { SALES_REP: "Zanzibarium" });
    await eventually(async () => (await ids(lucia, "zanzibarium")).length === 1, {
      what: "the sales rep found by lucia",
    });

    // SALES_REP hidden from peso 3 (lucia): its words match nothing, at once, for anyone (the
    // index holds only fields with no weight), in lists, counts and GraphQL.
    await weighSalesRep(2);
    expect((await lucia.get("/api/v4/core/CUST?source=anag-1&filter[SALES_REP]=Zanzibarium")).status).toBe(
      400,
    );
    expect(await ids(lucia, "zanzibarium")).toEqual([]);
    expect(await ids(lucia, "harbour zanzibarium")).toEqual([]);
    expect(await ids(anna, "zanzibarium")).toEqual([]);
    expect(await ids(lucia, "harbour")).toEqual([before]);
    const count = await lucia.get("/api/v4/core/CUST/count?source=anag-1&$search=zanzibarium");
    expect(count.body).toMatchObject({ count: 0 });
    const gql = await graphqlClient(
      t.app,
      luciaToken,
    )(`{ CUST(source: "anag-1", search: "zanzibarium") { data { CUST_ID } meta { total } } }`);
    expect(gql.body.data.CUST).toEqual({ data: [], meta: { total: 0 } });

    // The metadata event rebuilt the dimension's rows: the word has left the index.
    await indexText(before, (text) => !text.includes("Zanzibarium"));
    const during = await create({ NAME: "Quay Partners" }, { SALES_REP: "Zanzibarium" });
    expect(await indexText(during)).not.toContain("Zanzibarium");
    expect(await ids(lucia, "zanzibarium")).toEqual([]);

    // The weight lifted: the rebuild puts the field's words back, the record written meanwhile too.
    await weighSalesRep(null);
    await eventually(async () => (await ids(lucia, "zanzibarium")).length === 2, {
      what: "both records found by their sales rep again",
    });
    expect(await ids(lucia, "zanzibarium")).toEqual([before, during]);
  });

  it("a field weighted in a CENTER_DETT context is not searchable", async () => {
    const id = await create({ NAME: "Kumquat Orchard", EMAIL: "kumquat@orchard.example" });
    await eventually(async () => (await ids(lucia, "kumquat")).length === 1, { what: "the record indexed" });
    // lucia's center MI01 hides EMAIL from her: no filter on it, and no search either.
    expect((await lucia.get("/api/v4/core/CUST?source=anag-1&filter[EMAIL]=x")).status).toBe(400);
    expect(await ids(lucia, "kumquat@orchard.example")).toEqual([]);
    expect(await ids(anna, "kumquat@orchard.example")).toEqual([]);
    expect(await indexText(id)).not.toContain("orchard.example");
  });

  it("a rebuild walks the dimension in batches, across tenants, and derives what the indexer does", async () => {
    const db = t.services.db;
    const dim = t.services.metadata.current().dimensions.get("CUST")!;
    // The rows the indexer built from the events of the records created above.
    const { rows: built } = await db.query<{ RECORD_ID: string; TEXT: string }>(
      `SELECT "RECORD_ID", "TEXT" FROM "TB_SEARCH" WHERE "TENANT_ID" = 'acme' AND "DIMENSION" = 'CUST'`,
    );
    expect(built.length).toBeGreaterThanOrEqual(3);
    // Every customer of both tenants given a wrong row.
    const { rows: records } = await db.query<{ TENANT_ID: string; CUST_ID: number; NAME: string }>(
      `SELECT "TENANT_ID", "CUST_ID", "NAME" FROM "TB_ANAG_CUST00"`,
    );
    expect(new Set(records.map((r) => r.TENANT_ID))).toEqual(new Set(["acme", "globex"]));
    await db.query(
      `INSERT INTO "TB_SEARCH" ("TENANT_ID", "DIMENSION", "RECORD_ID", "TEXT", "OUTBOX_ID")
       SELECT "TENANT_ID", 'CUST', "CUST_ID"::text, 'stale', 0 FROM "TB_ANAG_CUST00"
       ON CONFLICT ("TENANT_ID", "DIMENSION", "RECORD_ID") DO UPDATE SET "TEXT" = 'stale'`,
    );
    expect(await rebuildSearchIndex(db, dim, 2)).toBe(records.length);
    const { rows: index } = await db.query<{ TENANT_ID: string; RECORD_ID: string; TEXT: string }>(
      `SELECT "TENANT_ID", "RECORD_ID", "TEXT" FROM "TB_SEARCH" WHERE "DIMENSION" = 'CUST'`,
    );
    const rebuilt = new Map(index.map((r) => [`${r.TENANT_ID}/${r.RECORD_ID}`, r.TEXT]));
    for (const r of records) expect(rebuilt.get(`${r.TENANT_ID}/${r.CUST_ID}`)).toContain(r.NAME);
    for (const r of built) expect(rebuilt.get(`acme/${r.RECORD_ID}`)).toBe(r.TEXT);
    // Nothing left to change.
    expect(await rebuildSearchIndex(db, dim, 2)).toBe(0);
  });
});

describe.each(BACKENDS)(
  "search index rebuilt only when the searchable fields change, across restarts (%s)",
  (backend) => {
    let t: TestApp;
    let anna: Client;
    beforeAll(async () => {
      // No event runtime: the indexers below are handed the metadata events themselves.
      t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
      anna = client(t.app, await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password));
    });
    afterAll(async () => {
      await t?.close();
    });

    let seen = "0";
    /** The metadata events written since the last call, as the bus hands them out. */
    async function metadataEvents(): Promise<ReceivedEvent[]> {
      const { rows } = await t.services.db.query<Parameters<typeof outboxRowToEvent>[0]>(
        `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID", "EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID",
              "PAYLOAD"::text AS "PAYLOAD", "TENANT_ID", "CREATED_AT"
         FROM "TB_ANAG_OUTBOX00"
        WHERE "AGGREGATE_TYPE" IN ('DIM', 'VAR', 'COST') AND "OUTBOX_ID" > $1::bigint
        ORDER BY "OUTBOX_ID"`,
        [seen],
      );
      seen = String(rows.at(-1)?.OUTBOX_ID ?? seen);
      return rows.map((r) => ({ ...outboxRowToEvent(r), attempt: 1 }));
    }
    /** SALES_REP's default configuration (TB_COST CUST/10) changed by anna, and the events it wrote. */
    async function changeSalesRep(data: Record<string, unknown>): Promise<ReceivedEvent[]> {
      const res = await anna.patch("/api/v4/core/COST/CUST/10?source=erp", { data });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      const events = await metadataEvents();
      expect(events.map((e) => e.dimension)).toEqual(["COST"]);
      return events;
    }
    /** A process started again: a new indexer over the same database. */
    const restarted = () => createSearchIndexer({ db: t.services.db, metadata: t.services.metadata });
    const db = () => t.services.db;
    let record: { TENANT_ID: string; CUST_ID: string };
    /** One index row made wrong: a rebuild of CUST's rows corrects it, nothing else does. */
    const staleRow = () =>
      db().query(
        `INSERT INTO "TB_SEARCH" ("TENANT_ID", "DIMENSION", "RECORD_ID", "TEXT", "OUTBOX_ID")
       VALUES ($1, 'CUST', $2, 'stale', 0)
       ON CONFLICT ("TENANT_ID", "DIMENSION", "RECORD_ID") DO UPDATE SET "TEXT" = 'stale'`,
        [record.TENANT_ID, record.CUST_ID],
      );
    const rowText = async () =>
      (
        await db().query<{ TEXT: string }>(
          `SELECT "TEXT" FROM "TB_SEARCH" WHERE "TENANT_ID" = $1 AND "DIMENSION" = 'CUST' AND "RECORD_ID" = $2`,
          [record.TENANT_ID, record.CUST_ID],
        )
      ).rows[0]?.TEXT;
    const rebuiltFrom = async () =>
      (
        await db().query<{ FIELDS: string }>(
          `SELECT "FIELDS" FROM "TB_SEARCH_FIELDS" WHERE "DIMENSION" = 'CUST'`,
        )
      ).rows[0]?.FIELDS;

    it("a restarted indexer rebuilds nothing for a metadata event that changes no searchable field, and rebuilds for one that does", async () => {
      const { rows } = await db().query<{ TENANT_ID: string; CUST_ID: string }>(
        `SELECT "TENANT_ID", "CUST_ID"::text AS "CUST_ID" FROM "TB_ANAG_CUST00" ORDER BY 1, 2 LIMIT 1`,
      );
      record = rows[0]!;
      await metadataEvents();

      // Nothing recorded yet: the first metadata event rebuilds, and records the fields.
      await staleRow();
      await restarted()(await changeSalesRep({ COD_UTENTE: 2 }));
      expect(await rowText()).not.toBe("stale");

      // Restarted; a change of no searchable field (its group): no rebuild.
      await staleRow();
      await restarted()(await changeSalesRep({ GROUP_NAME: "sales-desk" }));
      expect(await rowText()).toBe("stale");
      const fields = (await rebuiltFrom())?.split(",");
      expect(fields).toContain("NAME");
      expect(fields).not.toContain("SALES_REP");

      // Restarted again; the weight lifted, SALES_REP searchable again: rebuilt, the fields recorded.
      await restarted()(await changeSalesRep({ COD_UTENTE: null }));
      expect(await rowText()).not.toBe("stale");
      expect((await rebuiltFrom())?.split(",")).toContain("SALES_REP");
    });
  },
);

if (TEST_DATABASE_URL)
  describe("search and field visibility, a tenant on a database profile (postgres)", () => {
    let eu: ProfileDatabase;
    let t: TestApp;
    let runtime: EventRuntime;
    let anna: Client;
    let greta: Client;
    beforeAll(async () => {
      eu = await createProfileDatabase();
      t = await createTestApp("postgres", {
        fixture: await sampleWithGlobexOn("EU"),
        env: { ...NO_RATE_LIMITS, DATABASE_URL_EU: eu.url, EVENTS_POLL_MS: "60000" },
      });
      anna = client(t.app, await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password));
      greta = client(t.app, await loginAs(t.app, SAMPLE_USERS.greta.username, SAMPLE_USERS.greta.password));
      runtime = await startEventRuntime(t.services, { relay: true, subscribers: true });
    });
    afterAll(async () => {
      await runtime?.stop();
      await t?.close();
      await eu?.drop();
    });

    it("a metadata change rebuilds the index rows of the profile's records too", async () => {
      const created = await greta.post("/api/v4/core/CUST?source=anag-1", {
        data: { NAME: "Fjord Supplies" },
      });
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      const id = String(created.body.data.CUST_ID);
      const patched = await greta.patch(`/api/v4/core/CUST/${id}?source=anag-1`, {
        data: { SALES_REP: "Zanzibarium" },
      });
      expect(patched.status, JSON.stringify(patched.body)).toBe(200);
      const euText = () =>
        eu.query<{ TEXT: string }>(
          `SELECT "TEXT" FROM "TB_SEARCH" WHERE "TENANT_ID" = 'globex' AND "DIMENSION" = 'CUST' AND "RECORD_ID" = $1`,
          [id],
        );
      await eventually(async () => (await euText())[0]?.TEXT.includes("Zanzibarium"), {
        what: "the record indexed in the profile's database",
      });
      const search = async () =>
        (await greta.get("/api/v4/core/CUST?source=anag-1&$search=zanzibarium")).body.data as unknown[];
      expect(await search()).toHaveLength(1);

      const hide = await anna.patch("/api/v4/core/COST/CUST/10?source=erp", { data: { COD_UTENTE: 2 } });
      expect(hide.status, JSON.stringify(hide.body)).toBe(200);
      expect(await search()).toEqual([]);
      await eventually(
        async () => {
          const text = (await euText())[0]?.TEXT;
          return text?.includes("Fjord") && !text.includes("Zanzibarium");
        },
        { what: "the profile's index row rebuilt" },
      );
    });
  });
