// W1 over REST (with its total) and over GraphQL (no total): the statements each path sends, each
// under EXPLAIN ANALYZE, and the time of N sequential requests of each (issue 19).
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/explain-w1-graphql.ts
import pg from "pg";
import { buildApp } from "../src/app.ts";
import { listenAndLogin, UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { createTestServices } from "../test/helpers/env.ts";
import { autocannon } from "./autocannon.ts";
import { seedCustomers } from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 100_000);
const N = Number(process.env.BENCH_REQUESTS ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
let log: Array<{ text: string }> | null = null;
const services = await createTestServices("postgres", {
  fixture: "sample",
  env: UNLIMITED_ENV,
  onStatement: (text) => log?.push({ text }),
});
const app = await buildApp(services);
try {
  await seedCustomers(services.db, CUSTOMERS, ["MI", "RM", "TO", "MUC"]);
  const { base, token } = await listenAndLogin(app, "anna", "anna-secret-1");
  const auth = { authorization: `Bearer ${token}` };
  const restUrl = `${base}/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&sort=NAME&$num_rows=20`;
  const rest = () => fetch(restUrl, { headers: auth });
  const query = `{ CUST(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}, order_by: [{NAME: asc}], limit: 20) { data { CUST_ID CODE NAME CITY_ID CREDIT_LIMIT VIP } } }`;
  const graphql = () =>
    fetch(`${base}/graphql`, {
      method: "POST",
      headers: { ...auth, "content-type": "application/json" },
      body: JSON.stringify({ query }),
    });
  const runOf = (name: string) =>
    name === "REST"
      ? { url: restUrl, headers: auth }
      : {
          url: `${base}/graphql`,
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ query }),
        };
  for (const [name, run] of [
    ["REST", rest],
    ["GraphQL", graphql],
  ] as const) {
    // BENCH_ONLY=GraphQL (or REST): one path only (e.g. under --cpu-prof).
    if (process.env.BENCH_ONLY && process.env.BENCH_ONLY !== name) continue;
    log = [];
    const res = await run();
    const body = await res.text();
    const statements = log;
    log = null;
    console.log(`\n=== ${name}: ${res.status} ${body.slice(0, 120)}…\n${statements.length} statements`);
    for (const s of statements) console.log(`--\n${s.text}`);
    const t0 = performance.now();
    for (let i = 0; i < N; i++) await (await run()).text();
    console.log(`${name}: ${((performance.now() - t0) / N).toFixed(2)} ms per request (${N} sequential)`);
    const cpu0 = process.cpuUsage();
    const r = await autocannon({ ...runOf(name), connections: CONNECTIONS, duration: SECONDS });
    const cpu = process.cpuUsage(cpu0);
    console.log(
      `${name}: ${r.requests.average.toFixed(0)} req/s with ${CONNECTIONS} connections, p99 ${r.latency.p99} ms, non-2xx ${r.non2xx}; process CPU ${((cpu.user + cpu.system) / 1000 / Math.max(1, r.requests.total)).toFixed(2)} ms/request (load generator included)`,
    );
  }
  // The page statements under EXPLAIN ANALYZE, with the parameters of the request.
  if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
  const client = new pg.Client({ connectionString: services.db.connectionString });
  await client.connect();
  // A common city (a quarter of the rows) and a rare one whose customers all sort last by name.
  await client.query(
    `UPDATE "TB_ANAG_CUST00" SET "CITY_ID" = 'RARE' WHERE "CUST_ID" IN (SELECT "CUST_ID" FROM "TB_ANAG_CUST00" ORDER BY "NAME" DESC LIMIT 200)`,
  );
  await client.query(`ANALYZE "TB_ANAG_CUST00"`);
  const cols = `t."CUST_ID", t."CODE", t."NAME", t."CITY_ID", t."CREDIT_LIMIT", t."VIP"`;
  const from = (city: string) =>
    `FROM "TB_ANAG_CUST00" AS t WHERE t."TENANT_ID" = 'acme' AND t."TREC" <> 'C' AND t."CITY_ID" = '${city}'`;
  for (const city of ["MI", "RARE"]) {
    for (const [name, sql] of [
      [
        `GraphQL's page without total, city ${city}`,
        `SELECT ${cols} ${from(city)} ORDER BY t."NAME" ASC, t."CUST_ID" ASC LIMIT 21 OFFSET 0`,
      ],
      [
        `REST's page with its bounded total, city ${city}`,
        `WITH p AS (SELECT ${cols} ${from(city)} ORDER BY t."NAME" ASC, t."CUST_ID" ASC LIMIT 20 OFFSET 0),
         n AS (SELECT count(*) AS "n" FROM p)
         SELECT CASE WHEN n."n" < 20 THEN n."n" ELSE (SELECT count(*) FROM (SELECT 1 ${from(city)} LIMIT 10001) AS b) END AS "__total", p.*
         FROM n LEFT JOIN p ON true ORDER BY p."NAME" ASC, p."CUST_ID" ASC`,
      ],
    ]) {
      const plan = await client.query(`EXPLAIN (ANALYZE, BUFFERS) ${sql}`);
      console.log(`\n--- ${name}\n${plan.rows.map((r) => r["QUERY PLAN"]).join("\n")}`);
    }
  }
  await client.end();
} finally {
  await app.close();
  await services.close();
}
