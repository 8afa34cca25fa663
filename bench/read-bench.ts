// Read throughput on the real PostgreSQL: loads BENCH_RECORDS customers (default 100,000, each with
// one address) into the sample fixture's CUST dimension, then measures list, keyset page, detail,
// count and expand over HTTP with autocannon. Prints a Markdown table for docs/benchmarks.md, and
// the plan of a keyset page to show it runs on the primary key index.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/read-bench.ts
//
// BENCH_SECONDS (default 5) per scenario, BENCH_CONNECTIONS (default 10).
import { performance } from "node:perf_hooks";
import { buildApp } from "../src/app.ts";
import { listenAndLogin } from "../test/helpers/auth.ts";
import { autocannon } from "./autocannon.ts";
import { openBenchServices, seedCustomers } from "./seed.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 10);
const RECORDS = Number(process.env.BENCH_RECORDS ?? 100_000);

async function main() {
  const services = await openBenchServices();
  const db = services.db;
  const t0 = performance.now();
  await seedCustomers(db, RECORDS);
  await db.query(
    `INSERT INTO "TB_ANAG_ADDR00" ("CUST_ID", "KIND", "STREET", "CITY_ID", "TREC", "CDATA", "OWNER", "TENANT_ID")
     SELECT "CUST_ID", 'BILL', 'Via Bench ' || "CUST_ID", "CITY_ID", 'N', '20260101000000', 'bench', 'acme'
       FROM "TB_ANAG_CUST00" WHERE "OWNER" = 'bench'`,
  );
  await db.query(`ANALYZE "TB_ANAG_ADDR00"`);
  const loadSeconds = (performance.now() - t0) / 1000;

  const app = await buildApp(services);
  try {
    const { base, token } = await listenAndLogin(app, "anna", "anna-secret-1");
    const headers = { authorization: `Bearer ${token}` };
    const mid = Math.floor(RECORDS / 2);
    const core = `${base}/api/v4/core`;
    const scenarios: Array<[string, string]> = [
      ["list (100 rows + total)", `${core}/CUST?source=anag-1&$num_rows=100`],
      [
        "list, filter + sort on unindexed field",
        `${core}/CUST?source=anag-1&filter[CITY_ID]=MI&filter[CREDIT_LIMIT][$gt]=50000&sort=-CREDIT_LIMIT&$num_rows=50`,
      ],
      [
        "keyset page (id > x, 100 rows)",
        `${core}/CUST?source=anag-1&sort=CUST_ID&filter[CUST_ID][$gt]=${mid}&$num_rows=100`,
      ],
      ["get by id", `${core}/CUST/${mid}?source=anag-1`],
      ["get by id + $expand=CITY,ADDR", `${core}/CUST/${mid}?source=anag-1&$expand=CITY,ADDR`],
      ["count with filter", `${core}/CUST/count?source=anag-1&filter[CITY_ID]=MI`],
      ["list + $expand=CITY,ADDR (100 rows)", `${core}/CUST?source=anag-1&$num_rows=100&$expand=CITY,ADDR`],
    ];
    const lines = [`| Scenario | req/s | p50 ms | p99 ms | non-2xx |`, `|---|---:|---:|---:|---:|`];
    for (const [name, url] of scenarios) {
      const check = await fetch(url, { headers });
      if (check.status !== 200) throw new Error(`${name}: ${check.status} ${await check.text()}`);
      const r = await autocannon({ url, connections: CONNECTIONS, duration: SECONDS, headers });
      lines.push(
        `| ${name} | ${r.requests.average.toFixed(0)} | ${r.latency.p50} | ${r.latency.p99} | ${r.non2xx + r.errors} |`,
      );
      console.error(`done: ${name}`);
    }

    const debug = await fetch(
      `${core}/CUST?source=anag-1&sort=CUST_ID&filter[CUST_ID][$gt]=${mid}&$num_rows=100&debug=true`,
      { headers },
    );
    const { debug: q } = (await debug.json()) as { debug: { sql: string; params: unknown[] } };
    const plan = await db.query<{ "QUERY PLAN": string }>(`EXPLAIN (ANALYZE, COSTS OFF) ${q.sql}`, q.params);

    console.log(
      `PostgreSQL, ${RECORDS.toLocaleString("en")} customers (+ one address each, loaded in ${loadSeconds.toFixed(1)} s); ` +
        `autocannon, ${CONNECTIONS} connections, ${SECONDS} s per scenario, Node ${process.version}.\n`,
    );
    console.log(lines.join("\n"));
    console.log("\nPlan of the keyset page:\n");
    console.log(plan.rows.map((r) => `    ${r["QUERY PLAN"]}`).join("\n"));
  } finally {
    await app.close();
    await services.close();
  }
}

await main();
