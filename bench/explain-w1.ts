// bench/compare's W1 statement under EXPLAIN ANALYZE, as a custom and as a generic plan: Dimensio
// runs its reads as named prepared statements, which PostgreSQL switches to a generic plan after
// five executions when that looks no worse. Prints both plans with their timings.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/explain-w1.ts
import pg from "pg";
import { buildApp } from "../src/app.ts";
import { listenAndLogin, UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { createTestServices } from "../test/helpers/env.ts";
import { seedCustomers } from "./seed.ts";

const services = await createTestServices("postgres", { fixture: "sample", env: UNLIMITED_ENV });
const app = await buildApp(services);
try {
  await seedCustomers(services.db, 20_000, ["MI", "RM", "TO", "MUC"]);
  const { base, token } = await listenAndLogin(app, "anna", "anna-secret-1");
  const res = await fetch(
    `${base}/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&sort=NAME&$num_rows=20&debug=true`,
    { headers: { authorization: `Bearer ${token}` } },
  );
  const body = (await res.json()) as { debug?: { sql: string; params: unknown[] } };
  if (!body.debug) throw new Error(`no debug in the answer: ${JSON.stringify(body).slice(0, 300)}`);
  const { sql, params } = body.debug;
  console.log(sql, params);
  const literals = params.map((v) => (v === null ? "NULL" : pg.escapeLiteral(String(v)))).join(", ");
  for (const mode of ["force_custom_plan", "force_generic_plan"]) {
    await services.db.transaction(async (tx) => {
      await tx.query(`SET LOCAL plan_cache_mode = ${mode}`);
      await tx.query(`PREPARE w1 AS ${sql}`);
      const plan = await tx.query<{ "QUERY PLAN": string }>(
        `EXPLAIN (ANALYZE, BUFFERS) EXECUTE w1(${literals})`,
      );
      await tx.query("DEALLOCATE w1");
      console.log(`\n--- ${mode}\n${plan.rows.map((r) => r["QUERY PLAN"]).join("\n")}`);
    });
  }
} finally {
  await app.close();
  await services.close();
}
