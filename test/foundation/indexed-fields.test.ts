// TB_VAR.INDEXED (decisions.md §2, issue 11): the DDL sync makes an index on (TENANT_ID, field)
// for an INDEXED field, the planner uses it, and clearing INDEXED drops it again.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { indexName } from "../../src/ddl/sync.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe.each(BACKENDS)("INDEXED fields (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    await t?.close();
  });

  async function indexes(table: string): Promise<string[]> {
    const res = await t.services.db.query<{ indexname: string }>(
      "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = $1 ORDER BY 1",
      [table],
    );
    return res.rows.map((r) => r.indexname);
  }

  it("the sample's INDEXED fields have their index, and a filter on one uses it", async () => {
    expect(await indexes("TB_ANAG_CUST00")).toContain(indexName("TB_ANAG_CUST00", "NAME"));
    const plan = await t.services.db.transaction(async (tx) => {
      await tx.query("SET LOCAL enable_seqscan = off");
      const res = await tx.query<{ "QUERY PLAN": string }>(
        `EXPLAIN SELECT * FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "NAME" = 'Rossi Srl'`,
      );
      return res.rows.map((r) => r["QUERY PLAN"]).join("\n");
    });
    expect(plan).toContain(indexName("TB_ANAG_CUST00", "NAME"));
  });

  it("setting INDEXED through a metadata write adds the index; clearing it drops it", async () => {
    const name = indexName("TB_ANAG_CUST00", "CODE");
    expect(await indexes("TB_ANAG_CUST00")).not.toContain(name);
    const on = await anna.patch("/api/v4/core/VAR/CUST/CODE?source=erp", { data: { INDEXED: true } });
    expect(on.status, JSON.stringify(on.body)).toBe(200);
    expect(await indexes("TB_ANAG_CUST00")).toContain(name);
    const off = await anna.patch("/api/v4/core/VAR/CUST/CODE?source=erp", { data: { INDEXED: false } });
    expect(off.status).toBe(200);
    expect(await indexes("TB_ANAG_CUST00")).not.toContain(name);
    // A foreign key keeps its own index whatever INDEXED says.
    expect(await indexes("TB_ANAG_CUST00")).toContain(indexName("TB_ANAG_CUST00", "CITY_ID"));
  });

  it("TEXT, JSON and MEDIA fields cannot be INDEXED", async () => {
    const res = await anna.patch("/api/v4/core/VAR/CUST/NOTES?source=erp", { data: { INDEXED: true } });
    expect(res.status).toBe(400);
    expect(res.body.code).toBe("INVALID_METADATA");
    expect(JSON.stringify(res.body.errors)).toContain("INDEXED");
  });
});
