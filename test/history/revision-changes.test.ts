// A revision's changes as stored (TB_HISTORY.CHANGES) read in one form, {FIELD: {before, after}}
// (src/history/revisions.ts, revisionChanges): a create written in SQL keeps its record's tracked
// fields compactly under "$created" (every field, without a value as null); any other revision,
// and a create written by the general path, keeps before and after per changed field.
import { describe, expect, it } from "vitest";
import { revisionChanges } from "../../src/history/revisions.ts";

describe("revision changes as stored", () => {
  it("reads a compact create as every field with a value, before null", () => {
    const stored = { $created: { CITY_ID: "MI", NAME: "Milano", COUNTRY: null, TREC: "N" } };
    const expected = {
      CITY_ID: { before: null, after: "MI" },
      NAME: { before: null, after: "Milano" },
      TREC: { before: null, after: "N" },
    };
    expect(revisionChanges(stored)).toEqual(expected);
    expect(revisionChanges(JSON.stringify(stored))).toEqual(expected);
  });

  it("reads before and after as they are stored, JSON text or parsed", () => {
    const stored = { NAME: { before: "Milano", after: "Milan" }, TREC: { before: "N", after: "M" } };
    expect(revisionChanges(stored)).toEqual(stored);
    expect(revisionChanges(JSON.stringify(stored))).toEqual(stored);
  });

  it("keeps a value that is itself an object (a JSON field) whole", () => {
    const stored = { $created: { DATA: { a: null, b: [1, null] } } };
    expect(revisionChanges(stored)).toEqual({ DATA: { before: null, after: { a: null, b: [1, null] } } });
  });
});
