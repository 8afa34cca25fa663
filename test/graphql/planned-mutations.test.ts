// A mutation over a plan (src/graphql/planned-execution.ts) writes once and answers as graphql-js
// does, also when it fails part-way: its root fields run one after the other, and a failure is
// replayed by graphql-js over what the planned run's resolvers answered, never by calling them
// again. Each document runs twice on fresh state, once planned and once by graphql-js's own
// execute, and the answers and the writes (each root resolver's calls) are compared.
import {
  type ExecutionArgs,
  execute,
  GraphQLBoolean,
  GraphQLID,
  GraphQLInt,
  GraphQLList,
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  parse,
} from "graphql";
import { describe, expect, it } from "vitest";
import { type ExecutedBy, plannedExecution } from "../../src/graphql/planned-execution.ts";

interface Store {
  rows: { id: number; name: string }[];
  /** Every root resolver call, in order: "create:a", "fail", … */
  calls: string[];
}

const Row = new GraphQLObjectType<{ id: number; name: string }, Store>({
  name: "Row",
  fields: {
    id: { type: new GraphQLNonNull(GraphQLID), resolve: (r) => r.id },
    name: { type: GraphQLString, resolve: (r) => r.name },
    // A field whose completion fails after the row was written: its resolver throws.
    broken: {
      type: GraphQLString,
      resolve: () => {
        throw new Error("broken field");
      },
    },
    // A non-null field the row leaves null.
    required: { type: new GraphQLNonNull(GraphQLString), resolve: () => null },
    count: { type: GraphQLInt, resolve: (_r, _a, store) => store.rows.length },
  },
});

const Mutation = new GraphQLObjectType<unknown, Store>({
  name: "Mutation",
  fields: {
    create: {
      type: new GraphQLNonNull(Row),
      args: { name: { type: new GraphQLNonNull(GraphQLString) } },
      resolve: async (_root, args: { name: string }, store) => {
        store.calls.push(`create:${args.name}`);
        const row = { id: store.rows.length + 1, name: args.name };
        store.rows.push(row);
        return row;
      },
    },
    maybeCreate: {
      type: Row,
      args: { name: { type: new GraphQLNonNull(GraphQLString) }, fail: { type: GraphQLBoolean } },
      resolve: (_root, args: { name: string; fail?: boolean }, store) => {
        store.calls.push(`maybeCreate:${args.name}`);
        if (args.fail) throw new Error(`refused ${args.name}`);
        const row = { id: store.rows.length + 1, name: args.name };
        store.rows.push(row);
        return row;
      },
    },
    fail: {
      type: new GraphQLNonNull(GraphQLBoolean),
      resolve: (_root, _args, store) => {
        store.calls.push("fail");
        return Promise.reject(new Error("refused"));
      },
    },
    all: {
      type: new GraphQLList(Row),
      resolve: (_root, _args, store) => {
        store.calls.push("all");
        return store.rows;
      },
    },
  },
});

const Query = new GraphQLObjectType({ name: "Query", fields: { ok: { type: GraphQLBoolean } } });
const schema = new GraphQLSchema({ query: Query, mutation: Mutation });

async function both(source: string, variableValues?: Record<string, unknown>) {
  const document = parse(source);
  const planned = plannedExecution((by) => ran.push(by));
  const ran: ExecutedBy[] = [];
  const byPlan: Store = { rows: [], calls: [] };
  const byGraphQL: Store = { rows: [], calls: [] };
  const args = (store: Store): ExecutionArgs => ({ schema, document, contextValue: store, variableValues });
  const planAnswer = await planned(args(byPlan), (a) => execute(a));
  const graphqlAnswer = await execute(args(byGraphQL));
  return { planAnswer, graphqlAnswer, byPlan, byGraphQL, ran };
}

describe("planned mutations", () => {
  it("runs a mutation by its plan, root fields in order, each completed before the next", async () => {
    const r = await both(
      `mutation { a: create(name: "a") { id name count } b: create(name: "b") { id count } }`,
    );
    expect(r.ran).toEqual(["plan"]);
    expect(JSON.stringify(r.planAnswer)).toBe(JSON.stringify(r.graphqlAnswer));
    expect(r.planAnswer).toEqual({ data: { a: { id: "1", name: "a", count: 1 }, b: { id: "2", count: 2 } } });
    expect(r.byPlan).toEqual(r.byGraphQL);
  });

  it("takes its arguments from variables", async () => {
    const r = await both(`mutation ($n: String!) { create(name: $n) { id name } }`, { n: "v" });
    expect(r.ran).toEqual(["plan"]);
    expect(r.planAnswer).toEqual({ data: { create: { id: "1", name: "v" } } });
    expect(r.byPlan).toEqual(r.byGraphQL);
  });

  it.each([
    ["a sub-field's resolver throws after the write", `mutation { create(name: "a") { id broken } }`],
    ["a non-null sub-field is null after the write", `mutation { create(name: "a") { id required } }`],
    [
      "a non-null root field fails after an earlier one wrote: the later ones are not run",
      `mutation { a: create(name: "a") { id } fail b: create(name: "b") { id } }`,
    ],
    [
      "a nullable root field fails: the later ones are run, once",
      `mutation { a: create(name: "a") { id } x: maybeCreate(name: "x", fail: true) { id } b: maybeCreate(name: "b") { id count } all { name } }`,
    ],
    [
      "the second root field's completion fails: the first is not run again, the third is run once",
      `mutation { a: create(name: "a") { id } b: create(name: "b") { id required } c: maybeCreate(name: "c") { id count } }`,
    ],
  ])("%s: graphql-js's answer, and every write once", async (_name, source) => {
    const r = await both(source);
    expect(r.ran).toEqual(["plan_then_interpreter"]);
    expect(r.planAnswer).toHaveProperty("errors");
    expect(JSON.stringify(r.planAnswer)).toBe(JSON.stringify(r.graphqlAnswer));
    expect(r.byPlan.calls).toEqual(r.byGraphQL.calls);
    expect(r.byPlan.rows).toEqual(r.byGraphQL.rows);
  });

  it("replays a first root field that fails without calling it again", async () => {
    const r = await both(`mutation { fail a: create(name: "a") { id } }`);
    expect(r.ran).toEqual(["plan_then_interpreter"]);
    expect(JSON.stringify(r.planAnswer)).toBe(JSON.stringify(r.graphqlAnswer));
    expect(r.byPlan.calls).toEqual(["fail"]);
    expect(r.byGraphQL.calls).toEqual(["fail"]);
  });
});
