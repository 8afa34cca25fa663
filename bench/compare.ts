// bench/compare (issue 11): the same five workloads through Dimensio and through a "floor" (the
// same SQL behind a bare `pg` pool and node:http) on the same data in one run, with the ratio per
// workload. Ratios, not absolute numbers, are what to compare across machines and runs.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/compare.ts
//
// BENCH_CUSTOMERS (default 20,000), BENCH_ORDERS (default 100,000), BENCH_SECONDS (default 5),
// BENCH_CONNECTIONS (default 16). Prints a Markdown table with the machine's CPU steal.
// BENCH_ROLE=write runs Dimensio as the write backend (no relay or subscribers in its process);
// BENCH_NODE_OPTIONS passes V8 flags to it.
//
// Each server is a process of its own, as operators run it (Dimensio: `npm start`'s
// scripts/start.mjs with DATABASE_URL; the floor: bench/floor.ts, which loads only pg), and the
// load generator is this process: so each server's peak RSS (VmHWM) is its own, and neither
// shares its event loop with the load generator.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { loginOverHttp, UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { TEST_JWT_SECRET } from "../test/helpers/env.ts";
import { freePort, type Running, spawnStart, waitReady } from "../test/helpers/process.ts";
import { autocannon } from "./autocannon.ts";
import { openBenchServices, seedCustomers } from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 20_000);
const ORDERS = Number(process.env.BENCH_ORDERS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

function cpuTimes(): { steal: number; total: number } {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { steal: cpu[7] ?? 0, total: cpu.reduce((a, b) => a + b, 0) };
}

/** Peak resident memory of a process (VmHWM), in MB. */
function peakRssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmHWM:"));
  return Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024);
}

function startFloor(url: string): Promise<{ base: string; pid: number; stop: () => void }> {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/floor.ts", url], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += String(d);
      const m = /FLOOR_PORT=(\d+)/.exec(out);
      if (m)
        resolve({ base: `http://127.0.0.1:${m[1]}`, pid: child.pid!, stop: () => child.kill("SIGTERM") });
    });
    child.on("exit", (code) => reject(new Error(`the floor exited with ${code}`)));
  });
}

async function startDimensio(url: string): Promise<{ base: string; running: Running }> {
  const port = await freePort();
  const running = spawnStart({
    ...UNLIMITED_ENV,
    DATABASE_URL: url,
    JWT_SECRET: TEST_JWT_SECRET,
    DEMO_DATA: "false",
    LOG_LEVEL: "warn",
    PORT: String(port),
    DATA_DIR: `/tmp/dimensio-bench-${process.pid}`,
    // BENCH_ROLE: run Dimensio as one backend role (e.g. write: no relay or subscribers in it).
    ...(process.env.BENCH_ROLE ? { ROLE: process.env.BENCH_ROLE, GATEWAY_SECRET: BENCH_SECRET } : {}),
    // BENCH_NODE_OPTIONS: V8 settings of the Dimensio process (e.g. --max-semi-space-size=4).
    ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
  });
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, running);
  return { base, running };
}

const BENCH_SECRET = "bench-gateway-secret";

async function main() {
  const services = await openBenchServices();
  if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
  await seedCustomers(services.db, CUSTOMERS, ["MI", "RM", "TO", "MUC"]);
  await services.db.query(
    `INSERT INTO "TB_DOC_ORD00" ("ORD_NO", "CUST_ID", "ORD_DATE", "STATUS", "TOTAL", "TREC", "CDATA", "OWNER", "TENANT_ID")
     SELECT 'O-' || g, c."CUST_ID", '20260101', 'N', g % 1000, 'N', '20260101000000', 'bench', 'acme'
       FROM generate_series(1, $1::int) AS g
       JOIN LATERAL (SELECT "CUST_ID" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' ORDER BY "CUST_ID" OFFSET (g % $2::int) LIMIT 1) c ON true`,
    [ORDERS, Math.min(CUSTOMERS, 1000)],
  );
  await services.db.query(`ANALYZE "TB_DOC_ORD00"`);
  // The bulk load's dirty pages written now, not during the first measurements.
  await services.db.query("CHECKPOINT");
  const url = services.db.connectionString;
  let floor: Awaited<ReturnType<typeof startFloor>> | null = null;
  let dimensio: Awaited<ReturnType<typeof startDimensio>> | null = null;
  try {
    // Started inside the try: a server that fails to start stops the other and drops the data.
    floor = await startFloor(url);
    const floorBase = floor.base;
    dimensio = await startDimensio(url);
    const base = dimensio.base;
    const token = await loginOverHttp(
      base,
      "anna",
      "anna-secret-1",
      process.env.BENCH_ROLE ? { "x-gateway-secret": BENCH_SECRET } : {},
    );
    const auth = {
      authorization: `Bearer ${token}`,
      ...(process.env.BENCH_ROLE ? { "x-gateway-secret": BENCH_SECRET } : {}),
    };
    const { rows } = await services.db.query<{ id: number }>(
      `SELECT "CUST_ID" AS id FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' ORDER BY "CUST_ID" OFFSET $1 LIMIT 1`,
      [Math.floor(CUSTOMERS / 2)],
    );
    const id = rows[0]!.id;
    const create = JSON.stringify({ data: { NAME: "Bench create" } });
    type Run = { url: string; method?: string; body?: string; headers?: Record<string, string> };
    const json = { "content-type": "application/json" };
    const floorCreate = (path: string): Run => ({
      url: `${floorBase}/${path}`,
      method: "POST",
      body: create,
      headers: json,
    });
    const dimensioCreate: Run = {
      url: `${base}/api/v4/core/CUST?source=anag-1`,
      method: "POST",
      body: create,
      headers: { ...auth, ...json },
    };
    const workloads: Array<[string, Run, Run]> = [
      [
        "W1 list 20 customers of a city, sorted by name (+ total)",
        { url: `${floorBase}/w1?city=MI` },
        {
          url: `${base}/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&sort=NAME&$num_rows=20`,
          headers: auth,
        },
      ],
      [
        "W2 get a customer by id",
        { url: `${floorBase}/w2?id=${id}` },
        { url: `${base}/api/v4/core/CUST/${id}?source=anag-1`, headers: auth },
      ],
      [
        "W3 latest 20 orders, each with its customer",
        { url: `${floorBase}/w3` },
        {
          url: `${base}/api/v4/core/ORD?source=sales-1&sort=-ORD_ID&$num_rows=20&$expand=CUST&$count=none`,
          headers: auth,
        },
      ],
      ["W4 create a customer", floorCreate("w4"), dimensioCreate],
      [
        "W4s create a customer, the floor doing the same work (counter, row, outbox row) in one statement",
        floorCreate("w4s"),
        dimensioCreate,
      ],
      [
        "W5 count customers of a city",
        { url: `${floorBase}/w5?city=MI` },
        { url: `${base}/api/v4/core/CUST/count?source=anag-1&filter[CITY_ID]=MI`, headers: auth },
      ],
    ];
    const before = cpuTimes();
    const lines: string[] = [];
    // Warm-up: every endpoint of both once for a second (connections, plans, JIT of the process).
    for (const [, floorRun, dimRun] of workloads) {
      await autocannon({ ...floorRun, connections: 4, duration: 1 });
      await autocannon({ ...dimRun, connections: 4, duration: 1 });
    }
    for (const [name, floorRun, dimRun] of workloads) {
      const f = await autocannon({ ...floorRun, connections: CONNECTIONS, duration: SECONDS });
      const d = await autocannon({ ...dimRun, connections: CONNECTIONS, duration: SECONDS });
      if (f.non2xx || d.non2xx || f.errors || d.errors) {
        console.error(
          `${name}: floor non2xx ${f.non2xx} errors ${f.errors}; Dimensio non2xx ${d.non2xx} errors ${d.errors}`,
        );
      }
      const ratio = d.requests.average / f.requests.average;
      lines.push(
        `| ${name} | ${f.requests.average.toFixed(0)} | ${d.requests.average.toFixed(0)} | ${ratio.toFixed(2)} | ${d.latency.p50} / ${d.latency.p99} |`,
      );
    }
    const after = cpuTimes();
    const steal = ((after.steal - before.steal) / Math.max(1, after.total - before.total)) * 100;
    console.log(
      `\n${CUSTOMERS} customers, ${ORDERS} orders, ${CONNECTIONS} connections, ${SECONDS} s per run; CPU steal ${steal.toFixed(1)} %\n`,
    );
    console.log("| workload | floor req/s | Dimensio req/s | Dimensio / floor | Dimensio p50 / p99 ms |");
    console.log("|---|---:|---:|---:|---:|");
    for (const l of lines) console.log(l);
    console.log(
      `\npeak RSS of the servers' processes: floor ${peakRssMb(floor.pid)} MB, Dimensio ${peakRssMb(dimensio.running.child.pid!)} MB`,
    );
  } finally {
    floor?.stop();
    if (dimensio && dimensio.running.child.exitCode === null) {
      dimensio.running.child.kill("SIGTERM");
      await dimensio.running.exited;
    }
    await services.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
