// GraphQL input values become the JSON a REST body would be (src/graphql/input-values.ts): the
// write resolvers of both adapters take the same data.
import { describe, expect, it } from "vitest";
import { plain } from "../../src/graphql/input-values.ts";

/** An input object as graphql-js makes it: no prototype. */
function inputObject(fields: Record<string, unknown>): Record<string, unknown> {
  return Object.assign(Object.create(null) as Record<string, unknown>, fields);
}

describe("plain (GraphQL input values as JSON data)", () => {
  it("rebuilds input objects without a prototype as plain objects, nested ones and those in lists too", () => {
    const input = inputObject({
      NAME: "Rossi",
      ADDR: inputObject({ CITY: "MI", LINES: [inputObject({ N: 1 }), "x", 2, true, null] }),
    });
    const copy = plain(input);
    expect(copy).toEqual({ NAME: "Rossi", ADDR: { CITY: "MI", LINES: [{ N: 1 }, "x", 2, true, null] } });
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.getPrototypeOf(copy.ADDR)).toBe(Object.prototype);
    expect(Object.getPrototypeOf((copy.ADDR as { LINES: object[] }).LINES[0])).toBe(Object.prototype);
    expect(copy).not.toBe(input);
    expect(copy).toEqual(JSON.parse(JSON.stringify(input)));
  });

  it("leaves out undefined fields and turns undefined list items into null, as JSON does", () => {
    const input = inputObject({ A: undefined, B: [undefined, 1], C: null });
    expect(plain(input)).toEqual({ B: [null, 1], C: null });
    expect(Object.keys(plain(input))).toEqual(["B", "C"]);
    expect(plain(undefined)).toBeUndefined();
    expect(plain("text")).toBe("text");
  });

  it("keeps a __proto__ key of a JSON value as an own field, without changing the copy's prototype", () => {
    const value = JSON.parse('{"__proto__": {"polluted": true}, "a": 1}') as Record<string, unknown>;
    const copy = plain(inputObject({ DOC: value })).DOC as Record<string, unknown>;
    expect(Object.getPrototypeOf(copy)).toBe(Object.prototype);
    expect(Object.keys(copy)).toEqual(["__proto__", "a"]);
    expect(Object.getOwnPropertyDescriptor(copy, "__proto__")?.value).toEqual({ polluted: true });
    expect((copy as { polluted?: unknown }).polluted).toBeUndefined();
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it("passes any other object through JSON, as before", () => {
    const when = new Date("2026-11-27T00:00:00.000Z");
    expect(plain(inputObject({ AT: when }))).toEqual({ AT: "2026-11-27T00:00:00.000Z" });
  });
});
