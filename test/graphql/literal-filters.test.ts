// A `where` a document gives as a literal is coerced once per document and frozen by planned
// execution (src/graphql/planned-execution.ts): its filter is then built once too, and kept with
// it (src/graphql/resolve.ts, whereToFilter). A `where` from variables is a new object per request
// and gets a filter of its own each time. Both give the same filter.
import { describe, expect, it } from "vitest";
import { deepFreeze } from "../../src/deep-freeze.ts";
import { whereToFilter } from "../../src/graphql/resolve.ts";

const where = () => ({
  CITY_ID: { _eq: "MI" },
  _or: [{ NAME: { _like: "A%" } }, { CREDIT_LIMIT: { _gt: 100, _is_null: false } }],
  _not: { VIP: { _eq: true } },
});

describe("filters of literal where arguments", () => {
  it("builds a frozen where's filter once, frozen, equal to a fresh where's", () => {
    const literal = deepFreeze(where());
    const first = whereToFilter(literal);
    expect(whereToFilter(literal)).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(first).toEqual(whereToFilter(where()));
  });

  it("builds a where from variables anew each time (it may differ per request)", () => {
    const fromVariables = where();
    const first = whereToFilter(fromVariables);
    const second = whereToFilter(fromVariables);
    expect(second).not.toBe(first);
    expect(second).toEqual(first);
    expect(Object.isFrozen(first)).toBe(false);
  });

  it("keeps a literal where that asks for nothing as no filter", () => {
    expect(whereToFilter(deepFreeze({ CITY_ID: { _eq: undefined } }))).toBeNull();
    expect(whereToFilter(deepFreeze({}))).toBeNull();
  });
});
