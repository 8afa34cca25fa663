// Issue 8, point 6: NULL sorts last in both directions (decisions §11) while NOT NULL columns keep
// their plain (index-friendly) order; GET /DIM?source=… lists the dimensions the caller can read.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { compileRecordsPage } from "../../src/query/compile.ts";
import { planList } from "../../src/query/plan.ts";
import { parseListParams } from "../../src/query/rest-params.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { authorizedDimension, handContext, sampleModel } from "./support.ts";

describe.each(BACKENDS)("NULL last and the dimension list (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let lucia: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    [anna, lucia] = await Promise.all([clientFor(t.app, "anna"), clientFor(t.app, "lucia")]);
    for (const [name, limit] of [
      ["Nolimit A", null],
      ["Top B", 900_000],
      ["Nolimit C", null],
    ] as const) {
      const res = await anna.post("/api/v4/core/CUST?source=anag-1", {
        data: { NAME: name, CREDIT_LIMIT: limit },
      });
      expect(res.status).toBe(201);
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  async function limits(sort: string): Promise<Array<number | null>> {
    const res = await anna.get(
      `/api/v4/core/CUST?source=anag-1&sort=${sort}&$fields=CUST_ID,CREDIT_LIMIT&$num_rows=1000`,
    );
    expect(res.status).toBe(200);
    return res.body.data.map((r: { CREDIT_LIMIT: number | null }) => r.CREDIT_LIMIT);
  }

  it("sort=-CREDIT_LIMIT gives the highest first and the records without one last", async () => {
    const desc = await limits("-CREDIT_LIMIT");
    expect(desc[0]).toBe(900_000);
    const firstNull = desc.indexOf(null);
    expect(firstNull).toBeGreaterThan(0);
    expect(desc.slice(firstNull).every((v) => v === null)).toBe(true);
    const values = desc.slice(0, firstNull) as number[];
    expect(values).toEqual([...values].sort((a, b) => b - a));
  });

  it("sort=CREDIT_LIMIT puts them last too", async () => {
    const asc = await limits("CREDIT_LIMIT");
    const firstNull = asc.indexOf(null);
    expect(firstNull).toBeGreaterThan(0);
    expect(asc.slice(firstNull).every((v) => v === null)).toBe(true);
    const values = asc.slice(0, firstNull) as number[];
    expect(values).toEqual([...values].sort((a, b) => a - b));
  });

  it("GET /DIM?source=erp lists every dimension anna reads under erp; a narrower source lists its own", async () => {
    const all = await anna.get("/api/v4/core/DIM?source=erp");
    expect(all.status).toBe(200);
    expect(all.body.data.map((d: { COD_DIM: string }) => d.COD_DIM)).toEqual([
      "ADDR",
      "CITY",
      "CUST",
      "LST",
      "ORD",
      "ORDL",
      "PROD",
    ]);
    // PRICE is served by price-1, outside erp's subtree: listed through its own source.
    const price = await anna.get("/api/v4/core/DIM?source=price-1");
    expect(price.body.data.map((d: { COD_DIM: string }) => d.COD_DIM)).toEqual(["PRICE"]);
    expect(all.body.data.find((d: { COD_DIM: string }) => d.COD_DIM === "CUST")).toMatchObject({
      COD_DIM: "CUST",
      ID_FIELD: "CUST_ID",
    });
    const anag = await anna.get("/api/v4/core/DIM?source=anag");
    expect(anag.body.data.map((d: { COD_DIM: string }) => d.COD_DIM)).toEqual(["ADDR", "CITY", "CUST"]);
    const one = await lucia.get("/api/v4/core/DIM?source=anag-1");
    expect(one.body.data.map((d: { COD_DIM: string }) => d.COD_DIM)).toEqual(["CUST"]);
  });

  it("GET /DIM needs a source the caller holds a read grant on", async () => {
    expect((await anna.get("/api/v4/core/DIM")).body).toMatchObject({
      code: "MISSING_PARAMETER",
      status: 400,
    });
    const refused = await lucia.get("/api/v4/core/DIM?source=catalog-1");
    expect(refused.status).toBe(403);
  });
});

describe("ordering SQL", () => {
  it("writes NULLS LAST for a nullable DESC column, plain DESC for the NOT NULL id", () => {
    const model = sampleModel();
    const dim = authorizedDimension(model, "CUST");
    const plan = planList(handContext(), model, dim, parseListParams({ sort: "-CREDIT_LIMIT,-CUST_ID" }));
    if (plan.kind !== "records") throw new Error("records plan expected");
    const sql = compileRecordsPage(plan).text;
    expect(sql).toContain(`t."CREDIT_LIMIT" DESC NULLS LAST, t."CUST_ID" DESC`);
    expect(sql).not.toContain(`"CUST_ID" DESC NULLS LAST`);
  });
});
