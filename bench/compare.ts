// bench/compare (issue 11): the same five workloads through Dimensio and through a "floor" (the
// same SQL behind a bare `pg` pool and node:http) on the same data in one run, with the ratio per
// workload. Ratios, not absolute numbers, are what to compare across machines and runs.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/compare.ts
//
// BENCH_CUSTOMERS (default 20,000), BENCH_ORDERS (default 100,000), BENCH_SECONDS (default 5),
// BENCH_CONNECTIONS (default 16). Prints a Markdown table with the machine's CPU steal.
//
// Each server is a process of its own, as operators run it (Dimensio: `node --import tsx
// src/main.ts` with DATABASE_URL; the floor: this file with --floor), and the load generator is
// this process: so each server's peak RSS (VmHWM) is its own, and neither shares its event loop
// with the load generator.
import { spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";
import { UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { createTestServices, TEST_DATABASE_URL, TEST_JWT_SECRET } from "../test/helpers/env.ts";
import { freePort, type Running, spawnScript, waitReady } from "../test/helpers/process.ts";
import { autocannon } from "./autocannon.ts";
import { seedCustomers } from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 20_000);
const ORDERS = Number(process.env.BENCH_ORDERS ?? 100_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);

function cpuTimes(): { steal: number; total: number } {
  const cpu = readFileSync("/proc/stat", "utf8").split("\n")[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { steal: cpu[7] ?? 0, total: cpu.reduce((a, b) => a + b, 0) };
}

const CUST_COLUMNS = `"CUST_ID", "CODE", "NAME", "CITY_ID", "EMAIL", "CREDIT_LIMIT", "VIP", "NOTES", "SALES_REP", "TREC", "CDATA", "OWNER", "LDATA", "LOWNER"`;
const ORD_COLUMNS = `o."ORD_ID", o."ORD_NO", o."CUST_ID", o."ORD_DATE", o."STATUS", o."TOTAL", o."CREATED_IN", o."TREC", o."CDATA", o."OWNER", o."LDATA", o."LOWNER"`;

/** The floor: the same SQL through a bare pg pool, JSON out, no framework. */
function floorServer(pool: pg.Pool): http.Server {
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  return http.createServer(async (req, res) => {
    const url = new URL(req.url!, "http://x");
    try {
      switch (url.pathname) {
        case "/w1": {
          // The page and its total: two statements, as Dimensio (and PostgREST) run them.
          const city = url.searchParams.get("city");
          const [page, total] = await Promise.all([
            pool.query(
              `SELECT ${CUST_COLUMNS} FROM "TB_ANAG_CUST00"
                WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' AND "CITY_ID" = $1 ORDER BY "NAME" LIMIT 20`,
              [city],
            ),
            pool.query(
              `SELECT count(*)::int AS n FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' AND "CITY_ID" = $1`,
              [city],
            ),
          ]);
          return json(res, 200, { data: page.rows, meta: { total: total.rows[0].n } });
        }
        case "/w2": {
          const { rows } = await pool.query(
            `SELECT ${CUST_COLUMNS} FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "CUST_ID" = $1`,
            [Number(url.searchParams.get("id"))],
          );
          return json(res, rows.length ? 200 : 404, { data: rows[0] ?? null });
        }
        case "/w3": {
          const { rows } = await pool.query(
            `SELECT ${ORD_COLUMNS}, row_to_json(c) AS "CUST"
               FROM "TB_DOC_ORD00" o
               LEFT JOIN LATERAL (SELECT "CUST_ID", "CODE", "NAME", "CITY_ID" FROM "TB_ANAG_CUST00" c
                                   WHERE c."TENANT_ID" = o."TENANT_ID" AND c."CUST_ID" = o."CUST_ID") c ON true
              WHERE o."TENANT_ID" = 'acme' AND o."TREC" <> 'C' ORDER BY o."ORD_ID" DESC LIMIT 20`,
          );
          return json(res, 200, { data: rows });
        }
        case "/w4": {
          let body = "";
          for await (const chunk of req) body += chunk;
          const data = JSON.parse(body).data as { NAME: string };
          const { rows } = await pool.query(
            `INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "TREC", "CDATA", "OWNER", "TENANT_ID")
             VALUES ($1, 'F-' || left(md5(random()::text), 16), 'N', to_char(now(), 'YYYYMMDDHH24MISS'), 'floor', 'acme')
             RETURNING ${CUST_COLUMNS}`,
            [data.NAME],
          );
          return json(res, 201, { data: rows[0] });
        }
        case "/w4s": {
          // The same work as Dimensio's create, as an expert would hand-write it in one statement:
          // the tenant's gap-free counter for the CODE, the row, and its outbox row with NOTIFY.
          let body = "";
          for await (const chunk of req) body += chunk;
          const data = JSON.parse(body).data as { NAME: string };
          const { rows } = await pool.query(
            `WITH s AS (
               INSERT INTO "TB_SEQUENCE" ("TENANT_ID", "SEQ_NAME", "VALUE") VALUES ('acme', 'CUST', 1)
               ON CONFLICT ("TENANT_ID", "SEQ_NAME") DO UPDATE SET "VALUE" = "TB_SEQUENCE"."VALUE" + 1
               RETURNING "VALUE"),
             c AS (
               INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "TREC", "CDATA", "OWNER", "TENANT_ID")
               SELECT $1, 'C-' || lpad(s."VALUE"::text, 5, '0'), 'N', to_char(now(), 'YYYYMMDDHH24MISS'), 'floor', 'acme'
                 FROM s
               RETURNING ${CUST_COLUMNS}),
             o AS (
               INSERT INTO "TB_ANAG_OUTBOX00" ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT")
               SELECT 'CUST.Created', 'CUST', c."CUST_ID"::text, to_jsonb(c), 'acme', now() FROM c
               RETURNING "OUTBOX_ID")
             SELECT c.*, pg_notify('dimensio_outbox', '') FROM c, o`,
            [data.NAME],
          );
          return json(res, 201, { data: rows[0] });
        }
        case "/w5": {
          const { rows } = await pool.query(
            `SELECT count(*)::int AS n FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' AND "CITY_ID" = $1`,
            [url.searchParams.get("city")],
          );
          return json(res, 200, { count: rows[0].n });
        }
        default:
          return json(res, 404, {});
      }
    } catch (err) {
      return json(res, 500, { error: String(err) });
    }
  });
}

/** Peak resident memory of a process (VmHWM), in MB. */
function peakRssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmHWM:"));
  return Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024);
}

/** `--floor <url>`: this file as the floor's process; prints its port. */
async function runFloor(url: string) {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const server = floorServer(pool);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  console.log(`FLOOR_PORT=${(server.address() as AddressInfo).port}`);
  process.on("SIGTERM", () => server.close(() => pool.end().then(() => process.exit(0))));
}

function startFloor(url: string): Promise<{ base: string; pid: number; stop: () => void }> {
  const child = spawn(process.execPath, ["--import", "tsx", "bench/compare.ts", "--floor", url], {
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
  const running = spawnScript("src/main.ts", [], {
    ...UNLIMITED_ENV,
    DATABASE_URL: url,
    JWT_SECRET: TEST_JWT_SECRET,
    DEMO_DATA: "false",
    LOG_LEVEL: "warn",
    PORT: String(port),
    DATA_DIR: `/tmp/dimensio-bench-${process.pid}`,
  });
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, running);
  return { base, running };
}

async function login(base: string, username: string, password: string): Promise<string> {
  const res = await fetch(`${base}/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username, password }),
  });
  if (res.status !== 200) throw new Error(`login of ${username} answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { data: { access_token: string } }).data.access_token;
}

async function main() {
  if (!TEST_DATABASE_URL) {
    console.error(
      "Set TEST_DATABASE_URL to a PostgreSQL server (a scratch database is created and dropped).",
    );
    process.exit(2);
  }
  const services = await createTestServices("postgres", { fixture: "sample", env: UNLIMITED_ENV });
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
  const floor = await startFloor(url);
  const floorBase = floor.base;
  const dimensio = await startDimensio(url);
  try {
    const base = dimensio.base;
    const token = await login(base, "anna", "anna-secret-1");
    const auth = { authorization: `Bearer ${token}` };
    const { rows } = await services.db.query<{ id: number }>(
      `SELECT "CUST_ID" AS id FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' ORDER BY "CUST_ID" OFFSET $1 LIMIT 1`,
      [Math.floor(CUSTOMERS / 2)],
    );
    const id = rows[0]!.id;
    const create = JSON.stringify({ data: { NAME: "Bench create" } });
    type Run = { url: string; method?: string; body?: string; headers?: Record<string, string> };
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
        "W4 create a customer",
        {
          url: `${floorBase}/w4`,
          method: "POST",
          body: create,
          headers: { "content-type": "application/json" },
        },
        {
          url: `${base}/api/v4/core/CUST?source=anag-1`,
          method: "POST",
          body: create,
          headers: { ...auth, "content-type": "application/json" },
        },
      ],
      [
        "W4s create a customer, the floor doing the same work (counter, row, outbox row) in one statement",
        {
          url: `${floorBase}/w4s`,
          method: "POST",
          body: create,
          headers: { "content-type": "application/json" },
        },
        {
          url: `${base}/api/v4/core/CUST?source=anag-1`,
          method: "POST",
          body: create,
          headers: { ...auth, "content-type": "application/json" },
        },
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
    floor.stop();
    dimensio.running.child.kill("SIGTERM");
    await dimensio.running.exited;
    await services.close();
  }
}

const floorAt = process.argv.indexOf("--floor");
(floorAt > 0 ? runFloor(process.argv[floorAt + 1]!) : main()).catch((err) => {
  console.error(err);
  process.exit(1);
});
