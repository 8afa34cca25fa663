// Look-ahead (src/graphql/lookahead.ts) on its own: what a field's selection set asks for, as its
// resolver sees it, kept per document when the operation declares no variables. Pure: a small
// schema executed by graphql-js, no database (test/graphql/lookahead.test.ts runs it over the API).
import { buildSchema, execute, parse } from "graphql";
import { describe, expect, it } from "vitest";
import { createLookahead, type SelectedField } from "../../src/graphql/lookahead.ts";

const SDL = `
  type Query { item(id: Int): Item }
  type Item { a: String, b(x: Int = 1): String, child: Item }
`;

const lookahead = createLookahead();

/** Runs `document` on `schema`, answering the look-ahead the item's resolver saw. */
function selectedUnder(
  schema: ReturnType<typeof buildSchema>,
  document: ReturnType<typeof parse>,
  variableValues?: Record<string, unknown>,
): readonly SelectedField[] {
  let seen: readonly SelectedField[] | null = null;
  const rootValue = {
    item: (_args: unknown, _ctx: unknown, info: Parameters<typeof lookahead>[0]) => {
      seen = lookahead(info);
      return null;
    },
  };
  const result = execute({ schema, document, rootValue, variableValues });
  expect(result).toEqual({ data: { item: null } });
  return seen!;
}

const keys = (fields: readonly SelectedField[]): unknown =>
  fields.map((f) => (f.selections.length ? { [f.key]: keys(f.selections) } : f.key));

describe("lookahead", () => {
  const schema = buildSchema(SDL);

  it("follows fragments, applies @skip/@include, merges by response key, coerces arguments", () => {
    const document = parse(`{
      item { a b(x: 2) a child { a } ...F ... on Item { c: b } skipped: a @skip(if: true) }
    }
    fragment F on Item { child { b } }`);
    const selected = selectedUnder(schema, document);
    expect(keys(selected)).toEqual(["a", "b", { child: ["a", "b"] }, "c"]);
    expect(selected.find((f) => f.key === "b")).toMatchObject({
      name: "b",
      args: { x: 2 },
      hasArguments: true,
    });
    expect(selected.find((f) => f.key === "c")).toMatchObject({ name: "b", args: {}, hasArguments: false });
  });

  it("is walked once per document and schema for an operation without variables, and kept frozen", () => {
    const text = `{ item { a child { b } } }`;
    const document = parse(text);
    const first = selectedUnder(schema, document);
    // The same document again (the document cache hands the same object): the same look-ahead.
    expect(selectedUnder(schema, document)).toBe(first);
    expect(Object.isFrozen(first)).toBe(true);
    expect(Object.isFrozen(first[1]!.selections)).toBe(true);
    // Another document of the same text, or another schema: walked again, the same answer.
    const again = selectedUnder(schema, parse(text));
    expect(again).not.toBe(first);
    expect(again).toEqual(first);
    const other = buildSchema(SDL);
    const onOther = selectedUnder(other, document);
    expect(onOther).not.toBe(first);
    expect(onOther).toEqual(first);
  });

  it("is kept for an operation with variables when the selection set names none of them", () => {
    // The item's own argument is a variable; what is selected under it names none.
    const document = parse(`query($id: Int) { item(id: $id) { a b(x: 3) child { a } } }`);
    const first = selectedUnder(schema, document, { id: 1 });
    expect(keys(first)).toEqual(["a", "b", { child: ["a"] }]);
    expect(selectedUnder(schema, document, { id: 2 })).toBe(first);
  });

  it("is walked for each request when its arguments or directives name variables (they may change what is selected)", () => {
    const document = parse(`query($skip: Boolean!, $x: Int) { item { a @skip(if: $skip) b(x: $x) } }`);
    const skipped = selectedUnder(schema, document, { skip: true, x: 5 });
    const kept = selectedUnder(schema, document, { skip: false, x: 6 });
    expect(keys(skipped)).toEqual(["b"]);
    expect(keys(kept)).toEqual(["a", "b"]);
    expect(kept.find((f) => f.key === "b")!.args).toEqual({ x: 6 });
  });
});
