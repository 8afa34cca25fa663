// The heavy-request estimate of a REST list (src/rest/read-estimate.ts, issue 35 §4): besides the
// page it answers, the rows $offset skips, an order no index gives and a $group's scan of every
// matching row count, so that those requests take turns in their tenant's lane.
import { beforeAll, describe, expect, it } from "vitest";
import { readFixtureFile } from "../../src/fixtures/import.ts";
import { fixtureMetadata, fixtureSchema } from "../../src/fixtures/schema.ts";
import { buildModel } from "../../src/metadata/build.ts";
import { parseListParams } from "../../src/query/rest-params.ts";
import { estimateListValues } from "../../src/rest/read-estimate.ts";
import type { DimensionDef } from "../../src/types.ts";
import { SAMPLE_FIXTURE } from "../helpers/env.ts";

const SCAN_ROWS = 10_000;
const HEAVY = 5_000; // HEAVY_REQUEST_VALUES' default

describe("estimateListValues", () => {
  let cust: DimensionDef;
  /** CUST's fields: every field a page without $select answers. */
  let F: number;
  /** CUST's estimate for a REST query string. */
  const values = (query: Record<string, string>) =>
    estimateListValues(parseListParams(query), cust, SCAN_ROWS);

  beforeAll(async () => {
    const model = buildModel(fixtureMetadata(fixtureSchema.parse(await readFixtureFile(SAMPLE_FIXTURE))), 1);
    cust = model.dimensions.get("CUST")!;
    F = cust.fields.length; // with the system fields (TREC, audit)
    // What the figures below assume of the sample: NAME indexed, CITY_ID a foreign key,
    // CREDIT_LIMIT and CODE neither.
    expect(cust.fieldsByCode.get("CITY_ID")!.fkKind).not.toBeNull();
    expect(cust.fieldsByCode.get("NAME")!.indexed).toBe(true);
    expect(cust.fieldsByCode.get("CREDIT_LIMIT")!.indexed).toBe(false);
  });

  it("weighs a page as rows × fields × (1 + relations expanded)", () => {
    expect(values({})).toBe(100 * F);
    expect(values({ $num_rows: "1000", $select: "CUST_ID,NAME" })).toBe(1000 * 2);
    expect(values({ $num_rows: "200", $expand: "CITY" })).toBe(200 * F * 2);
  });

  it("counts the rows $offset skips: they are read before the page", () => {
    expect(values({ $offset: "6000" })).toBe(100 * F + 6000 * F);
    expect(values({ $offset: "6000", $select: "CUST_ID,NAME" })).toBe(100 * 2 + 6000 * 2);
    // A small page far down the table is heavy; the same page at the top is not.
    expect(values({ $num_rows: "10", $offset: "6000" })).toBeGreaterThanOrEqual(HEAVY);
    expect(values({ $num_rows: "10" })).toBeLessThan(HEAVY);
  });

  it("counts an order no index gives as a sort of every matching row on its keys", () => {
    const page = 100 * F;
    // The id, an indexed field and a foreign key lead an index: no sort beyond the page.
    expect(values({ sort: "CUST_ID" })).toBe(page);
    expect(values({ sort: "-NAME" })).toBe(page);
    expect(values({ sort: "CITY_ID,CREDIT_LIMIT" })).toBe(page);
    // Led by a field without an index: every matching row sorted, per sort key.
    expect(values({ sort: "CREDIT_LIMIT" })).toBe(page + SCAN_ROWS);
    expect(values({ sort: "CREDIT_LIMIT,CODE" })).toBe(page + 2 * SCAN_ROWS);
    expect(values({ $order: "CODE DESC, NAME" })).toBe(page + 2 * SCAN_ROWS);
    expect(values({ sort: "CREDIT_LIMIT,CODE" })).toBeGreaterThanOrEqual(HEAVY);
    // A composite index (TB_DIM.INDEXES) leading with the first key gives the order too.
    const withComposite: DimensionDef = { ...cust, compositeIndexes: [["VIP", "CREDIT_LIMIT"]] };
    const order = (sort: string) => estimateListValues(parseListParams({ sort }), withComposite, SCAN_ROWS);
    expect(order("VIP,CREDIT_LIMIT")).toBe(page);
    expect(order("CREDIT_LIMIT")).toBe(page + SCAN_ROWS);
    // The request: a two-field sort 6,000 rows down.
    expect(values({ sort: "CREDIT_LIMIT,CODE", $offset: "6000" })).toBe(page + 6000 * F + 2 * SCAN_ROWS);
  });

  it("counts a $group as reads of every matching row, for the groups and their count", () => {
    // One key and COUNT: two columns read over every row, twice (groups, count of groups).
    expect(values({ $group: "CITY_ID" })).toBe(100 * 2 + 2 * SCAN_ROWS * 2);
    expect(values({ $group: "CITY_ID", $num_rows: "10" })).toBeGreaterThanOrEqual(HEAVY);
    // Aggregates without groups: one scan.
    const aggregate = parseListParams({ aggregate: "SUM(CREDIT_LIMIT)" });
    expect(aggregate.aggregates).toHaveLength(1);
    expect(estimateListValues(aggregate, cust, SCAN_ROWS)).toBe(100 * 1 + SCAN_ROWS * 1);
    // Groups skipped by $offset are read too.
    expect(values({ $group: "CITY_ID", $offset: "50" })).toBe(150 * 2 + 2 * SCAN_ROWS * 2);
  });

  it("weighs an unknown dimension's page alone (the resolver answers 404)", () => {
    const q = parseListParams({ sort: "X,Y", $offset: "10" });
    expect(estimateListValues(q, undefined, SCAN_ROWS)).toBe(100 + 10);
  });
});
