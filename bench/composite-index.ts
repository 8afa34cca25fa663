// A list filtered by one field and sorted by another (bench/compare's W1 page:
// filter[CITY_ID]=MI&sort=NAME), before and after a burst of rows that sort first, without and with
// a composite index declared in TB_DIM.INDEXES (docs/decisions.md, "Composite indexes declared in
// metadata"). For each state: the index the plan reads, the buffers one execution touches, and the
// median execution time of the page statement over 50 EXPLAIN ANALYZE runs (custom plans).
// Buffers do not depend on the machine's load; times do.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/composite-index.ts
import pg from "pg";
import { buildApp } from "../src/app.ts";
import { listenAndLogin, UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { createTestServices } from "../test/helpers/env.ts";
import { seedCustomers } from "./seed.ts";

const BURST = Number(process.env.BURST ?? 58_000);
const RUNS = 50;

interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Shared Hit Blocks"?: number;
  "Shared Read Blocks"?: number;
  Plans?: PlanNode[];
}

function indexesOf(node: PlanNode): string[] {
  return [...(node["Index Name"] ? [node["Index Name"]] : []), ...(node.Plans ?? []).flatMap(indexesOf)];
}

function sorts(node: PlanNode): number {
  return (node["Node Type"].includes("Sort") ? 1 : 0) + (node.Plans ?? []).reduce((n, p) => n + sorts(p), 0);
}

const services = await createTestServices("postgres", { fixture: "sample", env: UNLIMITED_ENV });
const app = await buildApp(services);
try {
  await seedCustomers(services.db, 20_000, ["MI", "RM", "TO", "MUC"]);
  const { base, token } = await listenAndLogin(app, "anna", "anna-secret-1");
  const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  const res = await fetch(
    `${base}/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&sort=NAME&$num_rows=20&$count=none&debug=true`,
    { headers },
  );
  const body = (await res.json()) as { debug?: { sql: string; params: unknown[] } };
  if (!body.debug) throw new Error(`no debug in the answer: ${JSON.stringify(body).slice(0, 300)}`);
  const { sql, params } = body.debug;
  const literals = params.map((v) => (v === null ? "NULL" : pg.escapeLiteral(String(v))));
  const statement = sql.replace(/\$(\d+)/g, (_, i: string) => literals[Number(i) - 1]!);

  const measure = async (state: string) => {
    const times: number[] = [];
    let plan: PlanNode | null = null;
    for (let i = 0; i < RUNS; i++) {
      const out = await services.db.query<{
        "QUERY PLAN": Array<{ Plan: PlanNode; "Execution Time": number }>;
      }>(`EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${statement}`);
      const [first] = out.rows[0]!["QUERY PLAN"];
      plan = first!.Plan;
      times.push(first!["Execution Time"]);
    }
    times.sort((a, b) => a - b);
    const p = plan!;
    console.log(
      [
        state.padEnd(34),
        `index ${indexesOf(p).join("+") || "(none)"}`.padEnd(72),
        `sorts ${sorts(p)}`,
        `buffers ${(p["Shared Hit Blocks"] ?? 0) + (p["Shared Read Blocks"] ?? 0)}`.padEnd(16),
        `median ${times[RUNS >> 1]!.toFixed(3)} ms`,
      ].join("  "),
    );
  };

  await measure("20,000 rows, field indexes");
  await services.db.query(
    `INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "CITY_ID", "TREC", "CDATA", "OWNER", "TENANT_ID")
     SELECT 'A burst ' || lpad(g::text, 7, '0'), 'A-' || g, CASE WHEN g % 2 = 0 THEN 'RM' ELSE 'TO' END,
            'N', '20260101000000', 'bench', 'acme'
       FROM generate_series(1, $1::int) AS g`,
    [BURST],
  );
  await measure(`+${BURST} sorting first, unanalysed`);
  await services.db.query(`ANALYZE "TB_ANAG_CUST00"`);
  await measure(`+${BURST} sorting first, analysed`);
  const declared = await fetch(`${base}/api/v4/core/DIM/CUST?source=erp`, {
    method: "PATCH",
    headers,
    body: JSON.stringify({ data: { INDEXES: "CITY_ID,NAME" } }),
  });
  if (declared.status !== 200) throw new Error(`INDEXES refused: ${await declared.text()}`);
  await measure("INDEXES CITY_ID,NAME declared");
} finally {
  await app.close();
  await services.close();
}
