// bench/profiles (issue 36 §4): databases per tenant in one process.
//
// - What an idle profile costs: RSS of the service after its tenants' first requests opened three
//   profiles, against a control (a fourth tenant's first requests, on the main database), per
//   profile;
// - a cold profile's first request: the latency of a tenant's first GET, its profile not opened yet
//   (the pool's first connection, the profile's readiness check), and of the second;
// - W1–W5 (bench/compare's workloads, REST and GraphQL) for tenant `far` on profile P1 against the
//   same for tenant acme on the main database, the same rows in each, interleaved round by round
//   and their order swapped every other round: far / acme per workload (the target: ≥ 0.95).
//
// The service is `npm start`'s, as a process of its own, on four scratch databases of the
// PostgreSQL of TEST_DATABASE_URL (main, P1, P2, P3), all dropped at the end:
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/profiles.ts
//
// BENCH_CUSTOMERS (20,000), BENCH_ORDERS (100,000), BENCH_SECONDS (5), BENCH_CONNECTIONS (16),
// BENCH_ROUNDS (3), BENCH_WORKLOADS=W1,W2 runs only those.
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type pg from "pg";
import { loginOverHttp } from "../test/helpers/auth.ts";
import { SAMPLE_FIXTURE } from "../test/helpers/env.ts";
import { freePort, spawnScript, spawnStart, waitReady } from "../test/helpers/process.ts";
import { createProfileDatabase, type ProfileDatabase } from "../test/tenants/helpers.ts";
import { autocannon } from "./autocannon.ts";
import { memoryMb, processCpuMs, processQuiet } from "./process-stats.ts";
import {
  BENCH_CREATE,
  BENCH_CREATE_MUTATION,
  BENCH_PATHS,
  benchServiceEnv,
  requireBenchDatabase,
  seedCustomers,
  seedOrders,
} from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 20_000);
const ORDERS = Number(process.env.BENCH_ORDERS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const ONLY = process.env.BENCH_WORKLOADS?.split(",");
const PROFILES = ["P1", "P2", "P3"] as const;
/** The tenants of the bench beyond the sample's acme: where each lives, and its user. */
const TENANTS = [
  { id: "far", database: "P1", user: "anna_far" },
  { id: "far2", database: "P2", user: "anna_far2" },
  { id: "far3", database: "P3", user: "anna_far3" },
  { id: "near", database: null, user: "anna_near" },
] as const;
const CUST_FIELDS = "CUST_ID CODE NAME CITY_ID CREDIT_LIMIT VIP SALES_REP TREC CDATA OWNER LDATA LOWNER";

/** The sample fixture with the bench's tenants, each with a copy of anna (all rights). */
function benchFixture(): Record<string, unknown> {
  const fixture = JSON.parse(readFileSync(SAMPLE_FIXTURE, "utf8")) as {
    tenants: Array<Record<string, unknown>>;
    users: Array<Record<string, unknown>>;
  };
  const anna = fixture.users.find((u) => u.user_id === "anna")!;
  for (const t of TENANTS) {
    fixture.tenants.push({
      TENANT_ID: t.id,
      DESC_TENANT: `Bench ${t.id}`,
      ...(t.database ? { DATABASE: t.database } : {}),
    });
    fixture.users.push({ ...anna, user_id: t.user, tenant_id: t.id });
  }
  return fixture;
}

/** Outbox rows not yet published in a database. */
async function backlog(db: pg.Client): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`,
  );
  return rows[0]!.n;
}

type Run = { url: string; method?: string; body?: string; headers: Record<string, string> };
interface Measured {
  rps: number;
  cpu: number;
  p99: number;
}

async function main() {
  requireBenchDatabase();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "dimensio-bench-profiles-"));
  const main = await createProfileDatabase();
  const profiles = new Map<string, ProfileDatabase>();
  let running: ReturnType<typeof spawnStart> | null = null;
  try {
    for (const p of PROFILES) profiles.set(p, await createProfileDatabase());
    const profileEnv = Object.fromEntries(PROFILES.map((p) => [`DATABASE_URL_${p}`, profiles.get(p)!.url]));
    const env = { ...benchServiceEnv(main.url, 0, dataDir), ...profileEnv };
    // The fixture through `npm run import`: the main's tables and every profile's.
    const fixtureFile = path.join(dataDir, "fixture.json");
    await writeFile(fixtureFile, JSON.stringify(benchFixture()));
    const imported = spawnScript("src/cli/import.ts", [fixtureFile], env);
    if ((await imported.exited) !== 0) throw new Error(`the import failed:\n${imported.output()}`);
    // The same rows for acme on the main database and for far on P1.
    const p1 = profiles.get("P1")!.client;
    for (const [db, tenant] of [
      [main.client, "acme"],
      [p1, "far"],
    ] as const) {
      await seedCustomers(db, CUSTOMERS, ["MI", "RM", "TO", "MUC"], tenant);
      await seedOrders(db, ORDERS, CUSTOMERS, tenant);
      await db.query("CHECKPOINT");
    }

    const port = await freePort();
    running = spawnStart({ ...env, PORT: String(port) });
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, running);
    const pid = running.child.pid!;
    const tokens = new Map<string, string>();
    tokens.set("acme", await loginOverHttp(base, "anna", "anna-secret-1"));
    for (const t of TENANTS) tokens.set(t.id, await loginOverHttp(base, t.user, "anna-secret-1"));
    const auth = (tenant: string) => ({ authorization: `Bearer ${tokens.get(tenant)}` });
    const byIdOf = async (db: pg.Client, tenant: string) =>
      (
        await db.query<{ id: number }>(
          `SELECT "CUST_ID" AS id FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = $1 ORDER BY "CUST_ID" OFFSET $2 LIMIT 1`,
          [tenant, Math.floor(CUSTOMERS / 2)],
        )
      ).rows[0]!.id;

    // 1. Idle profiles' memory and cold first requests.
    const warm = (tenant: string) =>
      autocannon({
        url: `${base}${BENCH_PATHS.byId(1)}`,
        headers: auth(tenant),
        connections: 4,
        duration: 2,
      });
    const first = async (tenant: string) => {
      const timed = async () => {
        const t0 = performance.now();
        const res = await fetch(`${base}${BENCH_PATHS.list}`, { headers: auth(tenant) });
        await res.arrayBuffer();
        if (res.status !== 200) throw new Error(`${tenant}'s list answered ${res.status}`);
        return performance.now() - t0;
      };
      return { cold: await timed(), warm: await timed() };
    };
    await warm("acme");
    await processQuiet(pid);
    const control = await first("near");
    await warm("near");
    await warm("acme");
    await processQuiet(pid);
    const rssControl = memoryMb(pid, "VmRSS");
    const colds: Array<[string, { cold: number; warm: number }]> = [];
    for (const t of TENANTS.filter((x) => x.database))
      colds.push([`${t.id} (${t.database})`, await first(t.id)]);
    for (const t of TENANTS.filter((x) => x.database)) await warm(t.id);
    await warm("acme");
    await processQuiet(pid);
    const rssProfiles = memoryMb(pid, "VmRSS");

    // 2. W1–W5 on P1 against main.
    const ids = { acme: await byIdOf(main.client, "acme"), far: await byIdOf(p1, "far") };
    const json = { "content-type": "application/json" };
    const post = (url: string, body: string, headers: Record<string, string>): Run => ({
      url,
      method: "POST",
      body,
      headers: { ...headers, ...json },
    });
    const gql = (tenant: string, query: string) =>
      post(`${base}/graphql`, JSON.stringify({ query }), auth(tenant));
    const workloads: Array<{
      name: string;
      creates?: boolean;
      runs: (tenant: "acme" | "far") => [Run, Run];
    }> = [
      {
        name: "W1",
        runs: (t) => [
          { url: `${base}${BENCH_PATHS.list}`, headers: auth(t) },
          gql(
            t,
            `{ CUST(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}, order_by: [{NAME: asc}], limit: 20) { data { ${CUST_FIELDS} } } }`,
          ),
        ],
      },
      {
        name: "W2",
        runs: (t) => [
          { url: `${base}${BENCH_PATHS.byId(ids[t])}`, headers: auth(t) },
          gql(t, `{ CUST_by_id(source: "anag-1", id: "${ids[t]}") { ${CUST_FIELDS} } }`),
        ],
      },
      {
        name: "W3",
        runs: (t) => [
          { url: `${base}${BENCH_PATHS.orders}`, headers: auth(t) },
          gql(
            t,
            `{ ORD(source: "sales-1", order_by: [{ORD_ID: desc}], limit: 20) { data { ORD_ID ORD_NO CUST_ID ORD_DATE STATUS TOTAL TREC CDATA OWNER LDATA LOWNER CUST { CUST_ID CODE NAME CITY_ID } } } }`,
          ),
        ],
      },
      {
        name: "W4",
        creates: true,
        runs: (t) => [
          post(`${base}${BENCH_PATHS.create}`, JSON.stringify({ data: BENCH_CREATE }), auth(t)),
          gql(t, BENCH_CREATE_MUTATION),
        ],
      },
      {
        name: "W5",
        runs: (t) => [
          { url: `${base}${BENCH_PATHS.count}`, headers: auth(t) },
          gql(t, `{ CUST_count(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}) }`),
        ],
      },
    ];
    const dbOf = { acme: main.client, far: p1 };
    const measure = async (tenant: "acme" | "far", run: Run, creates: boolean): Promise<Measured> => {
      await autocannon({ ...run, connections: 4, duration: 1 });
      await processQuiet(pid);
      const cpu0 = processCpuMs(pid);
      const r = await autocannon({ ...run, connections: CONNECTIONS, duration: SECONDS });
      if (r.errors || r.non2xx)
        throw new Error(`${tenant} ${run.url}: ${r.errors} errors, ${r.non2xx} non-2xx`);
      if (creates) {
        for (const deadline = Date.now() + 120_000; (await backlog(dbOf[tenant])) > 0; ) {
          if (Date.now() > deadline) throw new Error(`${tenant}'s events were not all published`);
          await new Promise((res) => setTimeout(res, 20));
        }
        await dbOf[tenant].query(`DELETE FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = $1 AND "NAME" = $2`, [
          tenant,
          BENCH_CREATE.NAME,
        ]);
        await dbOf[tenant].query(`VACUUM ANALYZE "TB_ANAG_CUST00"`);
      }
      return {
        rps: r.requests.average,
        cpu: (processCpuMs(pid) - cpu0) / r.requests.total,
        p99: r.latency.p99,
      };
    };
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const rows: string[] = [];
    for (const w of workloads.filter((x) => !ONLY || ONLY.includes(x.name))) {
      for (const [api, index] of [
        ["REST", 0],
        ["GraphQL", 1],
      ] as const) {
        const pairs: Array<Record<"acme" | "far", Measured>> = [];
        for (let round = 0; round < ROUNDS; round++) {
          const pair: Partial<Record<"acme" | "far", Measured>> = {};
          for (const tenant of round % 2 ? (["far", "acme"] as const) : (["acme", "far"] as const)) {
            pair[tenant] = await measure(tenant, w.runs(tenant)[index]!, Boolean(w.creates));
            console.error(
              `  ${w.name} ${api} ${tenant} round ${round + 1}: ${pair[tenant]!.rps.toFixed(0)} req/s, CPU ${pair[tenant]!.cpu.toFixed(2)} ms, p99 ${pair[tenant]!.p99} ms`,
            );
          }
          pairs.push(pair as Record<"acme" | "far", Measured>);
        }
        const ratios = pairs.map((p) => p.far.rps / p.acme.rps);
        rows.push(
          `| ${w.name} | ${api} | ${median(pairs.map((p) => p.acme.rps)).toFixed(0)} | ${median(pairs.map((p) => p.far.rps)).toFixed(0)} | ${median(ratios).toFixed(3)} | ${ratios.map((r) => r.toFixed(2)).join(", ")} |`,
        );
      }
    }

    console.log(
      `\nbench/profiles: ${PROFILES.length} profiles, ${CUSTOMERS} customers and ${ORDERS} orders per measured tenant; Node ${process.version}; load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}\n`,
    );
    console.log("| idle profiles' memory | RSS |");
    console.log("|---|---:|");
    console.log(`| after a fourth tenant on the main database (control) | ${rssControl.toFixed(1)} MB |`);
    console.log(
      `| after three tenants on P1–P3 (three profiles open, idle) | ${rssProfiles.toFixed(1)} MB |`,
    );
    console.log(
      `| **per idle profile** | **${((rssProfiles - rssControl) / PROFILES.length).toFixed(1)} MB** |`,
    );
    console.log("\n| first request of a tenant (W1 list) | first | second |");
    console.log("|---|---:|---:|");
    console.log(`| near (main, control) | ${control.cold.toFixed(1)} ms | ${control.warm.toFixed(1)} ms |`);
    for (const [name, t] of colds)
      console.log(`| ${name}, cold profile | ${t.cold.toFixed(1)} ms | ${t.warm.toFixed(1)} ms |`);
    console.log(
      `\n| workload | API | acme on main req/s | far on P1 req/s | P1 / main (median of rounds' ratios) | rounds' ratios |`,
    );
    console.log("|---|---|---:|---:|---:|---|");
    for (const r of rows) console.log(r);
  } finally {
    if (running) {
      running.child.kill("SIGTERM");
      await running.exited;
    }
    for (const s of profiles.values()) await s.drop().catch(() => {});
    await main.drop().catch(() => {});
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
