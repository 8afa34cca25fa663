// Values derived from a dimension's definition once (src/metadata/per-definition.ts): definitions
// are immutable, one per metadata version, so the value is kept per definition object.
import { describe, expect, it } from "vitest";
import { perDefinition } from "../../src/metadata/per-definition.ts";
import type { DimensionDef } from "../../src/types.ts";

describe("perDefinition", () => {
  it("derives once per definition, again for a new definition (a metadata change), null included", () => {
    const calls: string[] = [];
    const codes = perDefinition((dim) => {
      calls.push(dim.code);
      return dim.code === "NONE" ? null : dim.fields.map((f) => f.code);
    });
    const v1 = { code: "CUST", fields: [{ code: "NAME" }] } as unknown as DimensionDef;
    const v2 = { code: "CUST", fields: [{ code: "NAME" }, { code: "CITY" }] } as unknown as DimensionDef;
    const none = { code: "NONE", fields: [] } as unknown as DimensionDef;
    expect(codes(v1)).toEqual(["NAME"]);
    expect(codes(v1)).toBe(codes(v1));
    expect(codes(v2)).toEqual(["NAME", "CITY"]);
    expect(codes(none)).toBeNull();
    expect(codes(none)).toBeNull();
    expect(calls).toEqual(["CUST", "CUST", "NONE"]);
  });
});
