// bench/compare (issue 11): the same five workloads through Dimensio and through a "floor" (the
// same SQL behind a bare `pg` pool and node:http) on the same data in one run, with the ratio per
// workload. Ratios, not absolute numbers, are what to compare across machines and runs.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/compare.ts
//
// BENCH_CUSTOMERS (default 20,000), BENCH_ORDERS (default 100,000), BENCH_SECONDS (default 5),
// BENCH_CONNECTIONS (default 16), BENCH_ROUNDS (default 1: each workload's floor and Dimensio runs
// repeated in turn, the median round shown with the range of ratios). Prints a Markdown table with
// the machine's CPU steal and the CPU time per request of each server and of PostgreSQL.
// BENCH_ROLE=write runs Dimensio as the write backend (no relay or subscribers in its process);
// BENCH_NODE_OPTIONS passes V8 flags to it; BENCH_WORKLOADS=W2,W4 runs only those.
//
// Each server is a process of its own, as operators run it (Dimensio: `npm start`'s
// scripts/start.mjs with DATABASE_URL; the floor: bench/floor.ts, which loads only pg), and the
// load generator is this process: so each server's peak RSS (VmHWM) is its own, and neither
// shares its event loop with the load generator.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { loginOverHttp, UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { TEST_JWT_SECRET } from "../test/helpers/env.ts";
import { freePort, type Running, spawnStart, waitReady } from "../test/helpers/process.ts";
import { autocannon } from "./autocannon.ts";
import { openBenchServices, seedCustomers } from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 20_000);
const ORDERS = Number(process.env.BENCH_ORDERS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 1));
/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux). */
const TICK_MS = 10;

/** CPU time (user + system) of a process so far, in ms. */
function processCpuMs(pid: number): number {
  try {
    // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
  } catch {
    return 0; // the process is gone
  }
}

/** CPU time of each PostgreSQL process on the machine so far, in ms, by pid. */
function postgresCpu(): Map<number, number> {
  const byPid = new Map<number, number>();
  for (const entry of readdirSync("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, "utf8").trim() !== "postgres") continue;
    } catch {
      continue;
    }
    byPid.set(Number(entry), processCpuMs(Number(entry)));
  }
  return byPid;
}

/** PostgreSQL's CPU time since `before` (a process that exited meanwhile is not counted). */
function postgresCpuMsSince(before: Map<number, number>): number {
  let total = 0;
  for (const [pid, ms] of postgresCpu()) total += ms - (before.get(pid) ?? 0);
  return total;
}

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
    // W4: the client gives the customer's code (the template is not drawn); W4s: the code comes
    // from the tenant's gap-free counter (`C-{seq:CUST:5}`), the floor doing that work too.
    const create = JSON.stringify({ data: { NAME: "Bench create", CODE: "B-00001" } });
    const numbered = JSON.stringify({ data: { NAME: "Bench create" } });
    type Run = { url: string; method?: string; body?: string; headers?: Record<string, string> };
    const json = { "content-type": "application/json" };
    const floorCreate = (path: string, body: string): Run => ({
      url: `${floorBase}/${path}`,
      method: "POST",
      body,
      headers: json,
    });
    const dimensioCreate = (body: string): Run => ({
      url: `${base}/api/v4/core/CUST?source=anag-1`,
      method: "POST",
      body,
      headers: { ...auth, ...json },
    });
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
      [
        "W4 create a customer, its code given (floor: the row and its outbox row in one statement)",
        floorCreate("w4o", create),
        dimensioCreate(create),
      ],
      [
        "W4b the same create (floor: the bare INSERT of the row, no outbox row)",
        floorCreate("w4", create),
        dimensioCreate(create),
      ],
      [
        "W4s create a customer numbered by the gap-free counter (floor: counter, row and outbox row in one statement)",
        floorCreate("w4s", numbered),
        dimensioCreate(numbered),
      ],
      [
        "W5 count customers of a city",
        { url: `${floorBase}/w5?city=MI` },
        { url: `${base}/api/v4/core/CUST/count?source=anag-1&filter[CITY_ID]=MI`, headers: auth },
      ],
    ];
    // BENCH_WORKLOADS=W4,W4s runs only those (their names' first word).
    const only = process.env.BENCH_WORKLOADS?.split(",");
    if (only)
      workloads.splice(0, workloads.length, ...workloads.filter(([n]) => only.includes(n.split(" ")[0]!)));
    const before = cpuTimes();
    const lines: string[] = [];
    const rates = new Map<string, { floor: number; dimensio: number }>();
    // Warm-up: every endpoint of both once for a second (connections, plans, JIT of the process).
    for (const [, floorRun, dimRun] of workloads) {
      await autocannon({ ...floorRun, connections: 4, duration: 1 });
      await autocannon({ ...dimRun, connections: 4, duration: 1 });
    }
    // Each workload runs BENCH_ROUNDS times, floor and Dimensio in turn; the table shows the
    // median round (by ratio). CPU per request: the server's process and all PostgreSQL processes.
    const measure = async (pid: number, run: Run) => {
      const cpu0 = processCpuMs(pid);
      const pg0 = postgresCpu();
      const r = await autocannon({ ...run, connections: CONNECTIONS, duration: SECONDS });
      const served = Math.max(1, r.requests.total);
      return {
        r,
        cpu: (processCpuMs(pid) - cpu0) / served,
        pg: postgresCpuMsSince(pg0) / served,
      };
    };
    for (const [name, floorRun, dimRun] of workloads) {
      const rounds: Array<{
        f: Awaited<ReturnType<typeof measure>>;
        d: Awaited<ReturnType<typeof measure>>;
      }> = [];
      for (let round = 0; round < ROUNDS; round++) {
        const f = await measure(floor.pid, floorRun);
        const d = await measure(dimensio.running.child.pid!, dimRun);
        if (f.r.non2xx || d.r.non2xx || f.r.errors || d.r.errors) {
          console.error(
            `${name}: floor non2xx ${f.r.non2xx} errors ${f.r.errors}; Dimensio non2xx ${d.r.non2xx} errors ${d.r.errors}`,
          );
        }
        rounds.push({ f, d });
      }
      const ratioOf = (x: (typeof rounds)[number]) => x.d.r.requests.average / x.f.r.requests.average;
      rounds.sort((a, b) => ratioOf(a) - ratioOf(b));
      const { f, d } = rounds[Math.floor(rounds.length / 2)]!;
      rates.set(name.slice(0, name.indexOf(" ")), {
        floor: f.r.requests.average,
        dimensio: d.r.requests.average,
      });
      const spread =
        rounds.length > 1 ? ` (${ratioOf(rounds[0]!).toFixed(2)}–${ratioOf(rounds.at(-1)!).toFixed(2)})` : "";
      lines.push(
        `| ${name} | ${f.r.requests.average.toFixed(0)} | ${d.r.requests.average.toFixed(0)} | ${ratioOf({ f, d }).toFixed(2)}${spread} | ${d.r.latency.p50} / ${d.r.latency.p99} | ${f.cpu.toFixed(2)} / ${f.pg.toFixed(2)} | ${d.cpu.toFixed(2)} / ${d.pg.toFixed(2)} |`,
      );
    }
    const after = cpuTimes();
    const steal = ((after.steal - before.steal) / Math.max(1, after.total - before.total)) * 100;
    console.log(
      `\n${CUSTOMERS} customers, ${ORDERS} orders, ${CONNECTIONS} connections, ${SECONDS} s per run; CPU steal ${steal.toFixed(1)} %\n`,
    );
    console.log(
      "| workload | floor req/s | Dimensio req/s | Dimensio / floor | Dimensio p50 / p99 ms | floor CPU ms/req: server / PostgreSQL | Dimensio CPU ms/req: server / PostgreSQL |",
    );
    console.log("|---|---:|---:|---:|---:|---:|---:|");
    for (const l of lines) console.log(l);
    const bare = rates.get("W4b");
    const numberedRates = rates.get("W4s");
    if (bare && numberedRates) {
      // What the gap-free counter costs anyone: both numbered creates against the bare INSERT.
      console.log(
        `\nnumbered creates against the bare INSERT: Dimensio ${(numberedRates.dimensio / bare.floor).toFixed(2)}, the floor's own ${(numberedRates.floor / bare.floor).toFixed(2)}`,
      );
    }
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
