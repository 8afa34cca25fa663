// The request's event budget (src/resolvers/write/change-event.ts): an event's bytes spent exactly,
// or held at their largest before a statement that builds the event and settled to the exact
// size after it (released when it fails), so that the request's later writes see what was written.
import { describe, expect, it } from "vitest";
import type { DimensionDef, FieldDef } from "../../src/types.ts";
import { createdEventBytesBound, reserveEventBytes } from "../../src/resolvers/write/change-event.ts";
import type { WriteLimits } from "../../src/resolvers/write/context.ts";
import { CounterValue } from "../../src/resolvers/write/templates.ts";
import { createTestServices } from "../helpers/env.ts";

const limitsOf = (maxBytes: number, usedBytes = 0): WriteLimits => ({
  fieldMaxBytes: 1024,
  events: { maxBytes, usedBytes },
});

describe("event bytes held for an event the database builds", () => {
  it("holds the bound, then counts the exact size once settled", () => {
    const limits = limitsOf(100, 10);
    const held = reserveEventBytes(limits, 60)!;
    expect(held).not.toBeNull();
    expect(limits.events.usedBytes).toBe(70);
    const payload = { A: "x" };
    held.settle(payload);
    expect(limits.events.usedBytes).toBe(10 + Buffer.byteLength(JSON.stringify(payload)));
  });

  it("gives the bound back when nothing was written, and holds nothing when it does not fit", () => {
    const limits = limitsOf(100, 10);
    reserveEventBytes(limits, 90)!.release();
    expect(limits.events.usedBytes).toBe(10);
    expect(reserveEventBytes(limits, 91)).toBeNull();
    expect(limits.events.usedBytes).toBe(10);
  });

  it("is settled or released once", () => {
    const held = reserveEventBytes(limitsOf(100), 50)!;
    held.release();
    expect(() => held.settle({})).toThrow(/once/);
    expect(() => held.release()).toThrow(/once/);
  });
});

describe("the bound of a Created event's bytes", () => {
  /** The bound as it was worked out per create before it was kept per dimension. */
  function reference(dim: DimensionDef, columns: ReadonlyArray<[string, unknown]>): number {
    const given = new Map(columns);
    let bytes = 2;
    for (const f of dim.fields) {
      bytes += Buffer.byteLength(JSON.stringify(f.code)) + 2;
      const v = given.get(f.code);
      if (v === undefined) bytes += f.isId && dim.idType === "INTEGER" ? 20 : 4;
      else if (v instanceof CounterValue)
        bytes += Buffer.byteLength(JSON.stringify(v.prefix + v.suffix)) + Math.max(20, v.width ?? 0);
      else if (typeof v === "string" && (f.dataType === "JSON" || f.dataType === "MEDIA"))
        bytes += Buffer.byteLength(v);
      else bytes += Buffer.byteLength(JSON.stringify(v) ?? "null");
    }
    return bytes;
  }
  const sample = (f: FieldDef, i: number): unknown => {
    if (f.dataType === "JSON" || f.dataType === "MEDIA") return `{"k":"välue ${i}"}`;
    if (f.dataType === "BOOLEAN") return i % 2 === 0;
    if (f.dataType === "INTEGER" || f.dataType === "DECIMAL") return i * 1234.5;
    return i % 3 === 0 ? new CounterValue("C-", "SEQ", 5, "/x") : `tëxt ${"é".repeat(i)}`;
  };

  it("is the same as working it out per create, for every dimension and any columns given", async () => {
    const services = await createTestServices("pglite", { fixture: "sample" });
    try {
      const dims = [...services.metadata.current().dimensions.values()];
      expect(dims.length).toBeGreaterThan(3);
      for (const dim of dims) {
        // None given, every other field given, every field given, one given twice over calls.
        const all = dim.fields.map((f, i): [string, unknown] => [f.code, sample(f, i)]);
        for (const columns of [[], all.filter((_, i) => i % 2 === 1), all, all.slice(0, 1)])
          expect(createdEventBytesBound(dim, columns)).toBe(reference(dim, columns));
        // A column the dimension does not have counts nothing, as before.
        expect(createdEventBytesBound(dim, [["NOT_A_FIELD", "x"]])).toBe(reference(dim, []));
      }
    } finally {
      await services.close();
    }
  });
});
