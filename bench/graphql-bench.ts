// REST and GraphQL side by side on the same data and server (issue 9): the read scenarios of
// read-bench.ts plus a create, each once through REST and once through GraphQL, with autocannon.
// Prints a Markdown table for docs/benchmarks.md.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/graphql-bench.ts
//
// BENCH_SECONDS (default 5) per scenario, BENCH_CONNECTIONS (default 10), BENCH_RECORDS (20,000).
import { buildApp } from "../src/app.ts";
import { listenAndLogin } from "../test/helpers/auth.ts";
import { autocannon, type AutocannonResult } from "./autocannon.ts";
import { openBenchServices, seedCustomers } from "./seed.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const RECORDS = Number(process.env.BENCH_RECORDS ?? 20_000);

async function main() {
  const services = await openBenchServices();
  await seedCustomers(services.db, RECORDS);
  const app = await buildApp(services);
  try {
    const { base, token } = await listenAndLogin(app, "anna", "anna-secret-1");
    const auth = { authorization: `Bearer ${token}` };
    const json = { ...auth, "content-type": "application/json" };
    const mid = Math.floor(RECORDS / 2);
    const core = `${base}/api/v4/core/CUST`;
    const gql = (query: string) => JSON.stringify({ query });
    type Run = { url: string; method?: string; body?: string; headers: Record<string, string> };
    const scenarios: Array<[string, Run, Run]> = [
      [
        "list with filter and sort (50 rows + total)",
        { url: `${core}?source=anag-1&filter[CITY_ID]=MI&sort=-CREDIT_LIMIT&$num_rows=50`, headers: auth },
        {
          url: `${base}/graphql`,
          method: "POST",
          headers: json,
          body: gql(
            `{ CUST(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}, order_by: [{CREDIT_LIMIT: desc}], limit: 50) { data { CUST_ID CODE NAME CITY_ID CREDIT_LIMIT VIP } meta { total } } }`,
          ),
        },
      ],
      [
        "get by id",
        { url: `${core}/${mid}?source=anag-1`, headers: auth },
        {
          url: `${base}/graphql`,
          method: "POST",
          headers: json,
          body: gql(
            `{ CUST_by_id(source: "anag-1", id: "${mid}") { CUST_ID CODE NAME CITY_ID CREDIT_LIMIT VIP } }`,
          ),
        },
      ],
      [
        "list with a relation (100 rows + CITY)",
        {
          url: `${core}?source=anag-1&$num_rows=100&$expand=CITY&$fields=CUST_ID,NAME,CITY_ID`,
          headers: auth,
        },
        {
          url: `${base}/graphql`,
          method: "POST",
          headers: json,
          body: gql(`{ CUST(source: "anag-1", limit: 100) { data { CUST_ID NAME CITY_ID CITY { NAME } } } }`),
        },
      ],
      [
        "count with filter",
        { url: `${core}/count?source=anag-1&filter[CITY_ID]=MI`, headers: auth },
        {
          url: `${base}/graphql`,
          method: "POST",
          headers: json,
          body: gql(`{ CUST_count(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}) }`),
        },
      ],
      [
        "create",
        {
          url: `${core}?source=anag-1`,
          method: "POST",
          headers: json,
          body: JSON.stringify({ data: { NAME: "Bench new", CITY_ID: "MI" } }),
        },
        {
          url: `${base}/graphql`,
          method: "POST",
          headers: json,
          body: gql(
            `mutation { CUST_create(source: "anag-1", data: {NAME: "Bench new", CITY_ID: "MI"}) { data { CUST_ID } } }`,
          ),
        },
      ],
    ];
    const lines = [
      "| Scenario | REST req/s | REST p99 ms | GraphQL req/s | GraphQL p99 ms | GraphQL / REST |",
      "|---|---:|---:|---:|---:|---:|",
    ];
    for (const [name, restRun, gqlRun] of scenarios) {
      const results: AutocannonResult[] = [];
      for (const run of [restRun, gqlRun]) {
        const check = await fetch(run.url, {
          method: run.method ?? "GET",
          headers: run.headers,
          body: run.body,
        });
        const text = await check.text();
        if (check.status >= 300 || text.includes('"errors"'))
          throw new Error(`${name}: ${check.status} ${text.slice(0, 300)}`);
        results.push(await autocannon({ ...run, connections: CONNECTIONS, duration: SECONDS }));
      }
      const [r, g] = results as [AutocannonResult, AutocannonResult];
      lines.push(
        `| ${name} | ${r.requests.average.toFixed(0)} | ${r.latency.p99} | ${g.requests.average.toFixed(0)} | ${g.latency.p99} | ${(g.requests.average / r.requests.average).toFixed(2)} |`,
      );
      console.error(`done: ${name}`);
    }
    console.log(
      `PostgreSQL, ${RECORDS.toLocaleString("en")} customers; autocannon, ${CONNECTIONS} connections, ${SECONDS} s per scenario, Node ${process.version}.\n`,
    );
    console.log(lines.join("\n"));
  } finally {
    await app.close();
    await services.close();
  }
}

await main();
