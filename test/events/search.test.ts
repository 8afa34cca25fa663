// The search indexer (issue 10): writes reach a full-text index through the bus; `$search` on REST
// lists and counts and `search:` in GraphQL find records by their words, in the caller's tenant only.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { type Client, client, NO_RATE_LIMITS } from "../write/http.ts";
import { eventually } from "./support.ts";

describe.each(BACKENDS)("full-text search (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let greta: Client;
  let annaToken: string;
  let runtime: EventRuntime;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, EVENTS_POLL_MS: "60000" },
    });
    annaToken = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    anna = client(t.app, annaToken);
    greta = client(t.app, await loginAs(t.app, SAMPLE_USERS.greta.username, SAMPLE_USERS.greta.password));
    runtime = await startEventRuntime(t.services, { relay: true, subscribers: true });
  });
  afterAll(async () => {
    await runtime?.stop();
    await t?.close();
  });

  const search = (c: Client, words: string, extra = "") =>
    c.get(`/api/v4/core/CUST?source=anag-1&$search=${encodeURIComponent(words)}${extra}`);
  const found = (c: Client, words: string, n: number) =>
    eventually(
      async () => {
        const res = await search(c, words);
        return res.body.data?.length === n ? res.body : undefined;
      },
      { what: `${n} results for ${words}` },
    );

  it("finds records by the words of their text fields, as lists, counts and GraphQL", async () => {
    const a = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Zanzibar Spice Trading" },
    });
    const b = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Quokka Imports Zanzibar" },
    });
    await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Unrelated Company" } });
    const both = await found(anna, "zanzibar", 2);
    expect(both.data.map((r: { NAME: string }) => r.NAME).sort()).toEqual([
      "Quokka Imports Zanzibar",
      "Zanzibar Spice Trading",
    ]);
    const one = await search(anna, "zanzibar spice");
    expect(one.body.data.map((r: { CUST_ID: number }) => r.CUST_ID)).toEqual([a.body.data.CUST_ID]);
    // Combined with a filter, and counted.
    const filtered = await search(anna, "zanzibar", `&filter[NAME][$like]=${encodeURIComponent("Quokka%")}`);
    expect(filtered.body.data.map((r: { CUST_ID: number }) => r.CUST_ID)).toEqual([b.body.data.CUST_ID]);
    const count = await anna.get("/api/v4/core/CUST/count?source=anag-1&$search=zanzibar");
    expect(count.body).toMatchObject({ count: 2, filters_applied: { $search: "zanzibar" } });
    const gql = await graphqlClient(
      t.app,
      annaToken,
    )(`{ CUST(source: "anag-1", search: "quokka") { data { CUST_ID NAME } meta { total } } }`);
    expect(gql.body.data.CUST).toEqual({
      data: [{ CUST_ID: b.body.data.CUST_ID, NAME: "Quokka Imports Zanzibar" }],
      meta: { total: 1 },
    });
    // Another tenant finds none of them.
    expect((await search(greta, "zanzibar")).body.data).toEqual([]);
  });

  it("follows changes: a renamed record is found by its new words only; a force-deleted one leaves the index", async () => {
    const created = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Wombat Logistics" },
    });
    const id = created.body.data.CUST_ID;
    await found(anna, "wombat", 1);
    await anna.patch(`/api/v4/core/CUST/${id}?source=anag-1`, { data: { NAME: "Platypus Logistics" } });
    await found(anna, "platypus", 1);
    expect((await search(anna, "wombat")).body.data).toEqual([]);
    expect((await anna.delete(`/api/v4/core/CUST/${id}?source=anag-1&force=true`)).status).toBe(200);
    await eventually(
      async () => {
        const { rows } = await t.services.db.query(
          `SELECT 1 FROM "TB_SEARCH" WHERE "DIMENSION" = 'CUST' AND "RECORD_ID" = $1`,
          [String(id)],
        );
        return rows.length === 0;
      },
      { what: "the index row removed" },
    );
  });

  it("an empty or oversized $search is 400", async () => {
    expect((await search(anna, " ")).body).toMatchObject({ status: 400, code: "INVALID_PARAMETER" });
    expect((await search(anna, "x".repeat(201))).status).toBe(400);
  });
});
