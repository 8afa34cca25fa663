// GET /api/v4/core/vars past its bound (spec 4.4, decisions.md §12): at most 1000 values a request,
// never cut silently. X-Has-More says whether more follow and X-Next-Offset where; $num_rows and
// $offset page the list in its order (display field, then key). GraphQL `vars` takes limit/offset.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { expectInvalidParameter } from "../helpers/error-body.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { client, NO_RATE_LIMITS } from "../write/http.ts";

/** Cities added past the sample's four (Milano, Muenchen, Roma, Torino): 1009 in all. */
const ADDED = 1005;
const CAP = 1000;

type City = { CITY_ID: string; NAME: string };

describe.each(BACKENDS)("vars lookups past 1000 values (%s)", (backend) => {
  let t: TestApp;
  let token: string;
  /** Every live city in the lookup's order, as the database holds them. */
  let all: City[];

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    const anna = client(t.app, token);
    // "Bulk …" sorts before the sample's cities: those are the ones a cut at 1000 left out.
    const cities = Array.from({ length: ADDED }, (_, i) => ({
      CITY_ID: `B${String(i).padStart(4, "0")}`,
      NAME: `Bulk ${String(i).padStart(4, "0")}`,
      COUNTRY: "IT",
    }));
    for (let i = 0; i < cities.length; i += 500) {
      const res = await anna.post("/api/v4/core/CITY/batch?source=anag-3", {
        data: cities.slice(i, i + 500),
      });
      expect(res.body.success).toBe(Math.min(500, cities.length - i));
    }
    all = [
      ...cities.map(({ CITY_ID, NAME }) => ({ CITY_ID, NAME })),
      { CITY_ID: "MI", NAME: "Milano" },
      { CITY_ID: "MUC", NAME: "Muenchen" },
      { CITY_ID: "RM", NAME: "Roma" },
      { CITY_ID: "TO", NAME: "Torino" },
    ];
    expect((await anna.get("/api/v4/core/CITY/count?source=anag-3")).body.count).toBe(all.length);
  });
  afterAll(async () => {
    await t?.close();
  });

  const vars = async (query: string, headers: Record<string, string> = {}) => {
    const res = await t.app.inject({
      method: "GET",
      url: `/api/v4/core/vars?${query}`,
      headers: { ...bearer(token), ...headers },
    });
    return { status: res.statusCode, body: res.json(), headers: res.headers };
  };

  it("the first 1000 say that more follow and where; the next page holds the rest, and says it is the last", async () => {
    for (const query of ["source=anag-1&field=CITY_ID&getACList=1", "source=anag-2&field=CITY_ID"]) {
      const first = await vars(query);
      expect(first.status, query).toBe(200);
      expect(first.body, query).toEqual(all.slice(0, CAP));
      expect(first.headers["x-has-more"], query).toBe("true");
      expect(first.headers["x-next-offset"], query).toBe(String(CAP));

      const rest = await vars(`${query}&$offset=${first.headers["x-next-offset"]}`);
      expect(rest.status, query).toBe(200);
      // Torino and the others past the 1000th, that the cut answer left out unsaid.
      expect(rest.body, query).toEqual(all.slice(CAP));
      expect(rest.headers["x-has-more"], query).toBe("false");
      expect(rest.headers["x-next-offset"], query).toBeUndefined();
    }
  });

  it("$num_rows pages the list in its order: the pages put together are the whole list, once", async () => {
    const seen: City[] = [];
    let offset: string | undefined = "0";
    let pages = 0;
    while (offset !== undefined) {
      const page = await vars(`source=anag-2&field=CITY_ID&$num_rows=400&$offset=${offset}`);
      expect(page.status).toBe(200);
      expect(page.body.length).toBeLessThanOrEqual(400);
      seen.push(...page.body);
      offset = page.headers["x-next-offset"] as string | undefined;
      expect(page.headers["x-has-more"]).toBe(String(offset !== undefined));
      pages++;
    }
    expect(pages).toBe(3);
    expect(seen).toEqual(all);
  });

  it("a list within the page says no more follow; an AC field without $filter is [] and no more", async () => {
    const filtered = await vars(
      `source=anag-1&field=CITY_ID&$filter=${encodeURIComponent("startwith(NAME,'Bulk 100')")}`,
    );
    expect(filtered.body.map((c: City) => c.CITY_ID)).toEqual(["B1000", "B1001", "B1002", "B1003", "B1004"]);
    expect(filtered.headers["x-has-more"]).toBe("false");
    // A page that ends exactly at the list's end: nothing follows it.
    const exact = await vars(`source=anag-2&field=CITY_ID&$num_rows=9&$offset=${CAP}`);
    expect(exact.body).toEqual(all.slice(CAP));
    expect(exact.headers["x-has-more"]).toBe("false");
    const none = await vars("source=anag-1&field=CITY_ID");
    expect(none.body).toEqual([]);
    expect(none.headers["x-has-more"]).toBe("false");
  });

  it("a page above 1000 or a paging value that is no whole number is 400 INVALID_PARAMETER", async () => {
    for (const [name, value, max] of [
      ["$num_rows", "1001", 1000],
      ["$num_rows", "abc", 1000],
      ["$num_rows", "", 1000],
      ["$offset", "-1", Number.MAX_SAFE_INTEGER],
    ] as const) {
      const res = await vars(`source=anag-2&field=CITY_ID&${name}=${value}`);
      expectInvalidParameter(
        res,
        { field: name, message: `${name} must be a whole number from 0 to ${max}; got '${value}'.` },
        `${name}=${value}`,
      );
    }
  });

  it("a browser on another origin may read the paging headers", async () => {
    const res = await vars("source=anag-2&field=CITY_ID", { origin: "https://app.example" });
    const exposed = String(res.headers["access-control-expose-headers"]);
    expect(exposed).toContain("X-Has-More");
    expect(exposed).toContain("X-Next-Offset");
  });

  it("GraphQL vars pages with limit and offset, at most 1000 a page", async () => {
    const gql = graphqlClient(t.app, token);
    const query = `query ($limit: Int, $offset: Int) {
      vars(source: "anag-2", field: "CITY_ID", limit: $limit, offset: $offset)
    }`;
    expect((await gql(query)).body.data.vars).toEqual(all.slice(0, CAP));
    expect((await gql(query, { offset: CAP })).body.data.vars).toEqual(all.slice(CAP));
    expect((await gql(query, { limit: 2, offset: 1003 })).body.data.vars).toEqual(all.slice(1003, 1005));
    const over = await gql(query, { limit: 1001 });
    expect(over.body.errors[0].extensions).toMatchObject({ code: "INVALID_PARAMETER", field: "limit" });
  });
});
