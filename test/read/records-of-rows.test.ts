// A page's rows become its records (src/resolvers/read/common.ts toRecords): the driver's rows are
// kept as the records when they hold exactly the record's fields, in order; anything else beside
// them (a sort key, a relation's key, an embedded relation's columns, the total) makes copies
// that hold the fields only, null for a missing one.
import { describe, expect, it } from "vitest";
import { toRecords } from "../../src/resolvers/read/common.ts";
import type { FieldDef } from "../../src/types.ts";

const fields = ["CUST_ID", "NAME", "CITY_ID"].map((code) => ({ code }) as FieldDef);

describe("toRecords", () => {
  it("keeps rows that hold exactly the fields", () => {
    const rows = [
      { CUST_ID: 1, NAME: "Rossi", CITY_ID: "MI" },
      { CUST_ID: 2, NAME: "Bianchi", CITY_ID: null },
    ];
    const records = toRecords(rows, fields);
    expect(records).toBe(rows);
    expect(records).toEqual([
      { CUST_ID: 1, NAME: "Rossi", CITY_ID: "MI" },
      { CUST_ID: 2, NAME: "Bianchi", CITY_ID: null },
    ]);
  });

  it.each([
    ["a column beside them", { CUST_ID: 1, NAME: "Rossi", CITY_ID: "MI", VIP: true }],
    ["the total before them", { __total: "9", CUST_ID: 1, NAME: "Rossi", CITY_ID: "MI" }],
    ["an embedded relation's column", { CUST_ID: 1, NAME: "Rossi", CITY_ID: "MI", "__x0.NAME": "Milano" }],
    ["another order", { NAME: "Rossi", CUST_ID: 1, CITY_ID: "MI" }],
  ])("copies the fields only when the rows hold %s", (_what, row) => {
    const rows: Array<Record<string, unknown>> = [row];
    const records = toRecords(rows, fields);
    expect(records).not.toBe(rows);
    expect(Object.keys(records[0]!)).toEqual(["CUST_ID", "NAME", "CITY_ID"]);
    expect(records[0]).toEqual({ CUST_ID: 1, NAME: "Rossi", CITY_ID: "MI" });
  });

  it("a missing field reads null in the copy", () => {
    expect(toRecords([{ CUST_ID: 1, NAME: "Rossi" }], fields)).toEqual([
      { CUST_ID: 1, NAME: "Rossi", CITY_ID: null },
    ]);
  });
});
