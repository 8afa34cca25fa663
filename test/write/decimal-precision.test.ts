// DECIMAL values travel as JSON numbers (decisions.md, issue 9): a double keeps 15 significant
// digits exactly, so a value with more is refused (400) rather than rounded in silence, and a value
// within the limit comes back from the database exactly as written.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseHandle } from "../../src/db/database.ts";
import { MAX_EXACT_DECIMAL_DIGITS, significantDigits } from "../../src/metadata/codecs.ts";
import { toColumnValue } from "../../src/resolvers/write/values.ts";
import type { FieldDef } from "../../src/types.ts";
import { BACKENDS, createTestDatabase } from "../helpers/env.ts";
import { sampleModel } from "../read/support.ts";

const base = sampleModel().dimensions.get("CUST")!.fieldsByCode.get("CREDIT_LIMIT")!;
const wide: FieldDef = { ...base, length: 30, decimals: 4 };

describe("DECIMAL precision", () => {
  it("counts significant digits on the shortest decimal form", () => {
    expect(significantDigits(1000)).toBe(1);
    expect(significantDigits(0.001)).toBe(1);
    expect(significantDigits(1234567890123.45)).toBe(15);
    expect(significantDigits(1e21)).toBe(1);
    expect(MAX_EXACT_DECIMAL_DIGITS).toBe(15);
  });

  it("accepts 15 significant digits and refuses 16 naming the field", () => {
    expect(toColumnValue(wide, 1234567890123.45, 1024)).toBe(1234567890123.45);
    expect(toColumnValue(wide, 0.1, 1024)).toBe(0.1);
    expect(() => toColumnValue(wide, 12345678901234.56, 1024)).toThrowError(
      expect.objectContaining({ code: "INVALID_FIELD_VALUE", field: "CREDIT_LIMIT" }),
    );
    // What JSON.parse gives for a client's 1234567890123456.7: already rounded, so refused.
    expect(() => toColumnValue(wide, JSON.parse("1234567890123456.7"), 1024)).toThrowError(
      expect.objectContaining({ message: expect.stringContaining("15 significant digits") }),
    );
  });
});

describe.each(BACKENDS)("DECIMAL round trip (%s)", (backend) => {
  let db: DatabaseHandle;
  beforeAll(async () => {
    db = await createTestDatabase(backend);
  });
  afterAll(async () => {
    await db?.close();
  });

  it("15 significant digits come back exactly", async () => {
    for (const v of [1234567890123.45, 0.000123456789012, 99999999999999.9, -1.5]) {
      const res = await db.query<{ v: number }>("SELECT $1::numeric(30, 15) AS v", [v]);
      expect(res.rows[0]!.v).toBe(v);
    }
  });
});
