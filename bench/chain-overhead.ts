// What the one chain of rules (src/graphql/chain.ts) costs an operation by itself (issue 35): the
// same small query on a schema of plain resolvers (no database), run through the chain as the
// plain POST transport runs it (envelop: parse, validate, execute) and through planned execution
// alone, many times in one process; prints µs of CPU per operation for each and their difference.
//
//   npx tsx bench/chain-overhead.ts
import { loadConfig } from "../src/config.ts";
import { graphqlChain, envelopChain } from "../src/graphql/chain.ts";
import { createValueEstimate } from "../src/graphql/complexity.ts";
import { createDocumentCache } from "../src/graphql/document-cache.ts";
import { plannedExecution } from "../src/graphql/planned-execution.ts";
import { createHeavyRequests } from "../src/http/heavy-requests.ts";
import { createMetrics } from "../src/observability/metrics.ts";
import {
  GraphQLInt,
  GraphQLObjectType,
  GraphQLSchema,
  GraphQLString,
  parse,
  type ExecutionResult,
} from "graphql";

const N = Number(process.env.BENCH_OPERATIONS ?? 50_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);

const Cust = new GraphQLObjectType({
  name: "CUST",
  fields: Object.fromEntries(
    ["CUST_ID", "CODE", "NAME", "CITY_ID", "SALES_REP", "OWNER"].map((f) => [
      f,
      { type: GraphQLString, resolve: (p: Record<string, unknown>) => p[f] },
    ]),
  ),
});
const row = {
  CUST_ID: "5000",
  CODE: "C5000",
  NAME: "Rossi",
  CITY_ID: "MI",
  SALES_REP: "anna",
  OWNER: "anna",
};
const schema = new GraphQLSchema({
  query: new GraphQLObjectType({
    name: "Query",
    fields: {
      CUST_by_id: {
        type: Cust,
        args: { source: { type: GraphQLString }, id: { type: GraphQLString } },
        resolve: async () => row,
      },
      CUST_count: { type: GraphQLInt, args: { source: { type: GraphQLString } }, resolve: async () => 42 },
    },
  }),
});
const config = loadConfig({ JWT_SECRET: "x".repeat(40), DEMO_DATA: "false" });
const metrics = createMetrics({ db: null, role: "all" });
const chain = graphqlChain({
  limits: config.graphql,
  writeLimits: config,
  model: () => ({}) as never, // read by the write budget's check, for mutations only
  documents: createDocumentCache(config.graphql.documentCacheBytes),
  estimate: createValueEstimate(),
  heavy: createHeavyRequests(config.heavyRequests),
  guard: null as never,
  metrics,
  maskError: (e) => e as Error,
});
const getEnveloped = envelopChain(chain as never);
const planned = plannedExecution();
const texts = {
  byId: `{ CUST_by_id(source: "anag-1", id: "5000") { CUST_ID CODE NAME CITY_ID SALES_REP OWNER } }`,
  count: `{ CUST_count(source: "anag-1") }`,
};
const context = () => ({
  laneClient: { gone: new AbortController().signal },
  caller: { principal: { tenantId: "acme" } },
});

async function throughChain(text: string): Promise<ExecutionResult> {
  const run = getEnveloped(context() as never);
  const document = run.parse(text);
  if (run.validate(schema, document).length) throw new Error("invalid");
  return (await run.execute({ schema, document, contextValue: context() })) as ExecutionResult;
}
const parsed = new Map<string, ReturnType<typeof parse>>();
async function plannedOnly(text: string): Promise<ExecutionResult> {
  let document = parsed.get(text);
  if (!document) {
    document = parse(text);
    parsed.set(text, document);
  }
  return (await planned({ schema, document, contextValue: context() }, () => {
    throw new Error("not planned");
  })) as ExecutionResult;
}

async function cpuPerOperation(fn: (t: string) => Promise<ExecutionResult>, text: string): Promise<number> {
  const start = process.cpuUsage();
  for (let i = 0; i < N; i++) await fn(text);
  const used = process.cpuUsage(start);
  return (used.user + used.system) / N;
}

async function main() {
  for (const [name, text] of Object.entries(texts)) {
    const a = JSON.stringify(await throughChain(text));
    const b = JSON.stringify(await plannedOnly(text));
    if (a !== b) throw new Error(`${name}: the chain answered ${a}, the plan ${b}`);
  }
  const least: Record<string, number> = {};
  for (let r = 0; r < ROUNDS; r++) {
    const line: string[] = [];
    for (const [name, text] of Object.entries(texts)) {
      for (const [how, fn] of [
        ["chain", throughChain],
        ["plan", plannedOnly],
      ] as const) {
        const us = await cpuPerOperation(fn, text);
        const key = `${name} ${how}`;
        least[key] = Math.min(least[key] ?? Infinity, us);
        line.push(`${key} ${us.toFixed(1)} µs`);
      }
    }
    console.log(`round ${r + 1}: ${line.join("; ")}`);
  }
  console.log(
    `least: ${Object.entries(least)
      .map(([k, v]) => `${k} ${v.toFixed(1)} µs`)
      .join("; ")}`,
  );
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
