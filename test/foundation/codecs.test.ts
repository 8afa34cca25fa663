// One codec per field type (issue 9): every type has one, each member answers, and no module
// outside src/metadata/codecs.ts switches on a field's type any more.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { CODECS, codecOf } from "../../src/metadata/codecs.ts";
import { DATA_TYPES, type DimensionDef, type FieldDef } from "../../src/types.ts";

const field = (dataType: FieldDef["dataType"], extra: Partial<FieldDef> = {}) =>
  ({ code: "F", dataType, length: null, decimals: 2, nullable: true, isId: false, ...extra }) as FieldDef;
const dim = { idType: "INTEGER" } as DimensionDef;

describe("field codecs", () => {
  it("every data type has a codec with every member", () => {
    expect(Object.keys(CODECS).sort()).toEqual([...DATA_TYPES].sort());
    for (const type of DATA_TYPES) {
      const c = codecOf(type);
      expect(c.column(field(type), dim).sqlType, type).toMatch(/^[A-Z]/);
      expect(typeof c.castFilter).toBe("function");
      expect(typeof c.toColumn).toBe("function");
      expect(typeof c.fromTemplate).toBe("function");
      expect(c.graphqlScalar).toBeTruthy();
      expect(c.responseSchema).toBeTypeOf("object");
      expect(c.openApiSchema).toBeTypeOf("object");
    }
  });

  it("one type, one answer in every layer", () => {
    const dec = codecOf("DECIMAL");
    expect(dec.column(field("DECIMAL", { length: 12 }), dim)).toMatchObject({
      sqlType: "NUMERIC(12, 2)",
      precision: 12,
      scale: 2,
    });
    expect(dec.castFilter(field("DECIMAL"), "1.5")).toBe(1.5);
    expect(() => dec.castFilter(field("DECIMAL"), "x")).toThrow(/expected a number/);
    expect(dec.toColumn(field("DECIMAL", { length: 12 }), 12.25, 1024)).toBe(12.25);
    expect(() => dec.toColumn(field("DECIMAL", { length: 12 }), 1.234, 1024)).toThrow(
      /after the decimal point/,
    );
    expect(dec.fromTemplate("3.5")).toBe(3.5);
    expect(dec.graphqlScalar).toBe("Decimal");
    const date = codecOf("DATE");
    expect(date.castFilter(field("DATE"), 20261123)).toBe("20261123");
    expect(() => date.toColumn(field("DATE"), "20260230", 1024)).toThrow(/date/);
    expect(codecOf("INTEGER").column(field("INTEGER", { isId: true }), dim).identity).toBe(true);
    expect(codecOf("JSON").fromTemplate('{"a":1}')).toEqual({ a: 1 });
    expect(codecOf("MEDIA").openApiSchema).toHaveProperty("oneOf");
  });

  it("no module outside the codecs switches on a field's type", async () => {
    const root = path.resolve(import.meta.dirname, "../../src");
    const offenders: string[] = [];
    const walk = async (dir: string) => {
      for (const e of await readdir(dir, { withFileTypes: true })) {
        const p = path.join(dir, e.name);
        if (e.isDirectory()) {
          if (e.name !== "generated") await walk(p);
        } else if (p.endsWith(".ts") && !p.endsWith(path.join("metadata", "codecs.ts"))) {
          const text = await readFile(p, "utf8");
          if (
            /switch \((?:\w+\.)?dataType\)|switch \(type\) \{\s*case "(?:STRING|INTEGER|DECIMAL)"/.test(text)
          ) {
            offenders.push(path.relative(root, p));
          }
        }
      }
    };
    await walk(root);
    expect(offenders).toEqual([]);
  });
});
