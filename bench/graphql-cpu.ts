// Process CPU per GraphQL request (issue 19), as bench/rest-cpu.ts measures REST's: the request path
// without sockets or a load generator. Loads the sample fixture, BENCH_CUSTOMERS customers and
// BENCH_ORDERS orders on PostgreSQL, then sends BENCH_REQUESTS requests of each workload through
// app.inject, BENCH_CONCURRENCY at a time, and prints the process's CPU time (user + system) per
// request; the least of BENCH_ROUNDS rounds is printed last. gW2 is bench/compare's W2 as a GraphQL
// POST (one customer by id), gW3 its W3 (the 20 newest orders with their customer); rW2 is REST's
// W2, for the difference the adapter makes; gW5 is W5 (a city's customers counted), rW5 the same over REST; gW1 is W1's list of 20 customers of a city by name,
// gPage1000 a page of 1,000 customers (bench/isolation's heavy page), at BENCH_REQUESTS / 20; gW4
// is W4's create of a customer as a GraphQL mutation, rW4 the same create over REST (201).
// BENCH_WORKLOADS=gW1,gPage1000 runs only those; BENCH_GC=1 adds the garbage collector's time per
// request (minor and other collections); BENCH_EVENTS=1 runs the creates' event side in the process;
// BENCH_ENV (K=V,K=V) adds settings of the service (e.g. EVENTS_GATHER_MS=50).
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/graphql-cpu.ts
import type { InjectOptions } from "fastify";
import { bearer, loginAs } from "../test/helpers/auth.ts";
import { eventPartsOf, startEventRuntime } from "../src/events/runtime.ts";
import { cpuBenchSettings, gcPerRequest, injectConcurrently, printCpuPerRequest } from "./cpu-measure.ts";
import {
  allEventsPublished,
  BENCH_CREATE,
  BENCH_CREATE_MUTATION,
  BENCH_PATHS,
  benchEnv,
  forgetBenchCreates,
  openBenchApp,
} from "./seed.ts";

const settings = cpuBenchSettings();
const CUST_FIELDS = "CUST_ID CODE NAME CITY_ID CREDIT_LIMIT VIP SALES_REP TREC CDATA OWNER LDATA LOWNER";

async function main() {
  const bench = await openBenchApp({
    customers: settings.customers,
    orders: settings.orders,
    env: { LOG_LEVEL: "warn", ...benchEnv() },
  });
  const { app } = bench;
  // BENCH_EVENTS=1: the creates' event side (relay, subscribers) runs in the process, as under
  // `npm start`, and a create measurement lasts until their events are published.
  const events = process.env.BENCH_EVENTS
    ? await startEventRuntime(bench.services, eventPartsOf("all")!)
    : null;
  try {
    const headers = bearer(await loginAs(app, "anna", "anna-secret-1"));
    const gql = (query: string): InjectOptions => ({
      method: "POST",
      url: "/graphql",
      headers: { ...headers, "content-type": "application/json", accept: "application/json" },
      payload: JSON.stringify({ query }),
    });
    const workloads: Array<[string, InjectOptions]> = [
      ["gW2", gql(`{ CUST_by_id(source: "anag-1", id: "5000") { ${CUST_FIELDS} } }`)],
      [
        "gW3",
        gql(
          `{ ORD(source: "sales-1", order_by: [{ORD_ID: desc}], limit: 20) { data { ORD_ID ORD_NO CUST_ID ORD_DATE STATUS TOTAL TREC CDATA OWNER LDATA LOWNER CUST { CUST_ID CODE NAME CITY_ID } } } }`,
        ),
      ],
      [
        "gW1",
        gql(
          `{ CUST(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}, order_by: [{NAME: asc}], limit: 20) { data { CUST_ID CODE NAME CITY_ID } } }`,
        ),
      ],
      ["gPage1000", gql(`{ CUST(source: "anag-1", limit: 1000) { data { ${CUST_FIELDS} } } }`)],
      ["rW2", { method: "GET", url: "/api/v4/core/CUST/5000?source=anag-1", headers }],
      ["gW5", gql(`{ CUST_count(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}) }`)],
      ["rW5", { method: "GET", url: BENCH_PATHS.count, headers }],
      ["gW4", gql(BENCH_CREATE_MUTATION)],
      [
        "rW4",
        {
          method: "POST",
          url: BENCH_PATHS.create,
          headers: { ...headers, "content-type": "application/json" },
          payload: JSON.stringify({ data: BENCH_CREATE }),
        },
      ],
    ];
    // A GraphQL error is answered with 200: the body is checked too.
    const run = injectConcurrently(
      app,
      settings.concurrency,
      (res) => (res.statusCode === 200 || res.statusCode === 201) && !res.body.includes('"errors"'),
    );
    const { only } = settings;
    if (only) workloads.splice(0, workloads.length, ...workloads.filter(([name]) => only.includes(name)));
    for (const [, request] of workloads) await run(request, 500); // warm-up: JIT, caches
    // The creates' customers go after each create workload, so that the lists measure the seed.
    const forget = () => forgetBenchCreates(bench.services.db);
    await forget();
    await printCpuPerRequest(
      workloads.map(([name, request]) => ({
        name,
        requests: name === "gPage1000" ? Math.ceil(settings.requests / 20) : settings.requests,
        send: async (n) => {
          await run(request, n);
          if (events && (name === "gW4" || name === "rW4")) await allEventsPublished(bench.services.db);
        },
        ...(name === "gW4" || name === "rW4" ? { after: forget } : {}),
      })),
      settings.rounds,
      process.env.BENCH_GC ? gcPerRequest() : undefined,
    );
  } finally {
    await events?.stop();
    await bench.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
