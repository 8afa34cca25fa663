// A mutation's write budget (src/graphql/write-budget.ts) as worked out before its first write: a
// mutation without variables once per document, schema and metadata version (what it writes is in
// its text), one with variables from each request's values. Pure: the sample metadata's schema,
// no database (the refusals over HTTP are test/graphql/bounds.test.ts's).
import { parse } from "graphql";
import { describe, expect, it } from "vitest";
import { graphqlResolvers } from "../../src/graphql/resolve.ts";
import { createPlannedWrites } from "../../src/graphql/write-budget.ts";
import { buildGraphQLSchema } from "../../src/schema/build.ts";
import { sampleModel } from "../read/support.ts";

const model = sampleModel();
const schema = buildGraphQLSchema(model, graphqlResolvers());
const plannedWrites = createPlannedWrites();

describe("a mutation's planned writes", () => {
  it("are worked out once for a document without variables, per schema and metadata version", () => {
    const document = parse(
      `mutation { a: CUST_create(source: "anag-1", data: {NAME: "Été", CODE: "C-1"}) { event_id }
                  b: CUST_create(source: "anag-1", data: {NAME: "B", CODE: "C-2"}) { event_id } }`,
    );
    const first = plannedWrites(schema, model, document, undefined, undefined);
    // Two records; the strings' UTF-8 bytes: "Été" 5, "C-1" 3, "B" 1, "C-2" 3.
    expect(first).toEqual({ records: 2, stringBytes: 12 });
    expect(Object.isFrozen(first)).toBe(true);
    // The same document again (the document cache hands the same object): the same answer, kept.
    expect(plannedWrites(schema, model, document, undefined, { ignored: "x" })).toBe(first);
    // Another metadata version (or schema) works it out again: cascades and fields may differ.
    const next = sampleModel();
    const again = plannedWrites(schema, next, document, undefined, undefined);
    expect(again).toEqual(first);
    expect(again).not.toBe(first);
    const otherSchema = buildGraphQLSchema(model, graphqlResolvers());
    expect(plannedWrites(otherSchema, model, document, undefined, undefined)).not.toBe(first);
  });

  it("are worked out from each request's values when the document has variables", () => {
    const document = parse(
      `mutation($d: CUST_create_input!) { CUST_create(source: "anag-1", data: $d) { event_id } }`,
    );
    const short = plannedWrites(schema, model, document, undefined, { d: { NAME: "A", CODE: "C" } });
    const long = plannedWrites(schema, model, document, undefined, {
      d: { NAME: "A".repeat(50), CODE: "C" },
    });
    expect(short).toEqual({ records: 1, stringBytes: 2 });
    expect(long).toEqual({ records: 1, stringBytes: 51 });
    // Variables that do not coerce: nothing planned (graphql-js refuses the operation itself).
    expect(plannedWrites(schema, model, document, undefined, { d: { NAME: 5 } })).toBeNull();
  });

  it("are none for a query", () => {
    const document = parse(`{ CUST_count(source: "anag-1") }`);
    expect(plannedWrites(schema, model, document, undefined, undefined)).toBeNull();
  });
});
