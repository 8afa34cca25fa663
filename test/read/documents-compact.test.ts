// Documents with `compact: true` (decisions.md §14 of the spec, issue 18 §5): every audit field of
// either AUDIT_STYLE is left out of the root and of every part, TREC included (decisions.md §2
// counts it among the audit fields), and so are null values; without compact they are all there.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { sampleFixtureWith, setRow } from "../write/helpers.ts";

const TREC_STYLE = ["TREC", "CDATA", "OWNER", "LDATA", "LOWNER"];
const CREATED_STYLE = [
  "TREC",
  "CREATED_BY",
  "CREATED_AT",
  "UPDATED_BY",
  "UPDATED_AT",
  "DELETED_BY",
  "DELETED_AT",
];

describe.each(BACKENDS)("documents with compact (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;

  beforeAll(async () => {
    const fixture = await sampleFixtureWith((f) => {
      // Prices carry the CREATED audit style; products keep the default (TREC).
      setRow(f.TB_DIM, { COD_DIM: "PRICE" }, { AUDIT_STYLE: "CREATED" });
      // The stored document lists audit fields by name, on the root and on the part.
      const doc = f.TB_DOCUMENT!.find((d) => d.DOC_NAME === "listino")!;
      const def = doc.DEFINITION as { fields: string[]; parts: Array<{ fields: string[] }> };
      def.fields.push("TREC", "CDATA", "OWNER");
      def.parts[0]!.fields.push("TREC", "CREATED_BY", "CREATED_AT");
    });
    t = await createTestApp(backend, { fixture, env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    await t?.close();
  });

  const onTheFly = (compact: boolean) =>
    anna.post("/api/v4/document?source=catalog-1", {
      dim: "PROD",
      val_key: "P0001",
      related_dim: { PRICE: [] },
      compact,
    });

  it("an on-the-fly document: without compact TREC and the audit fields are there, with it none is", async () => {
    const full = await onTheFly(false);
    expect(full.status).toBe(200);
    for (const f of TREC_STYLE) expect(full.body.data, `root ${f}`).toHaveProperty(f);
    expect(full.body.data.TREC).toBe("N");
    expect(full.body.data.PRICE.length).toBeGreaterThan(0);
    for (const price of full.body.data.PRICE) {
      for (const f of CREATED_STYLE) expect(price, `part ${f}`).toHaveProperty(f);
      expect(price.TREC).toBe("N");
    }

    const compact = await onTheFly(true);
    expect(compact.status).toBe(200);
    expect(compact.body.data).toMatchObject({ PROD_ID: "P0001", NAME: "Bolt M8" });
    for (const f of TREC_STYLE) expect(compact.body.data, `root ${f}`).not.toHaveProperty(f);
    expect(compact.body.data.PRICE).toHaveLength(full.body.data.PRICE.length);
    for (const price of compact.body.data.PRICE) {
      expect(price).toHaveProperty("PRICE");
      for (const f of CREATED_STYLE) expect(price, `part ${f}`).not.toHaveProperty(f);
      // Null values are left out too.
      expect(Object.values(price)).not.toContain(null);
    }
  });

  it("a stored document that lists TREC and audit fields by name leaves them out with ?compact=true", async () => {
    const full = await anna.get("/api/v4/document/listino/P0001?source=catalog-1&codLst=STD");
    expect(full.status).toBe(200);
    expect(full.body.data).toMatchObject({ PROD_ID: "P0001", TREC: "N", OWNER: expect.any(String) });
    expect(full.body.data.prices).toEqual([
      expect.objectContaining({ COD_LST: "STD", PRICE: 0.12, TREC: "N", CREATED_BY: expect.any(String) }),
    ]);

    const compact = await anna.get("/api/v4/document/listino/P0001?source=catalog-1&codLst=STD&compact=true");
    expect(compact.status).toBe(200);
    expect(compact.body.data).toEqual({
      PROD_ID: "P0001",
      NAME: "Bolt M8",
      UNIT_PRICE: 0.12,
      prices: [{ COD_LST: "STD", AREA: "NORTH", PRICE: 0.12 }],
    });
  });
});
