// bench/compare (issues 11 and 19): the same five workloads on the same data in one run through
// - the page-only floor: a bare node:http + pg server running one parameterised statement per
//   request, the page only (no authentication, no tenant column, no TREC rule, no total);
// - the floor: the same SQL as Dimensio (tenant, TREC rule, total, outbox row) behind the same
//   bare server;
// - PostGraphile 5 (Amber preset) over the same tables, no authentication (BENCH_POSTGRAPHILE=0
//   leaves it out; it needs Node 22 or later: the project's node_modules/.bin/node);
// - Dimensio over REST and over GraphQL: a document per request (POST /graphql), a persisted
//   operation by its hash alone (registered once before: automatic persisted queries), and over
//   WebSocket (graphql-transport-ws, one operation at a time per socket: bench/ws-load.ts),
// with the ratios per workload. W1v is W1 with its city passed as a variable (GraphQL and
// PostGraphile). Ratios, not absolute numbers, are what to compare across machines
// and runs.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/compare.ts
//
// BENCH_CUSTOMERS (default 20,000), BENCH_ORDERS (default 100,000), BENCH_SECONDS (default 5),
// BENCH_CONNECTIONS (default 16), BENCH_ROUNDS (default 1: each workload's servers run in turn,
// each server's median round shown). Prints Markdown tables with the machine's CPU steal, load
// average, the CPU time per request of each server and of PostgreSQL, and each server's peak RSS.
// BENCH_ROLE=write runs Dimensio as the write backend (no relay or subscribers in its process);
// BENCH_NODE_OPTIONS passes V8 flags to it, BENCH_NODE_ARGS flags placed after npm start's own (to
// override them, e.g. --max-semi-space-size=16), BENCH_ENV (K=V,K=V) settings; BENCH_WORKLOADS=W2,W4 runs only those;
// BENCH_GC=1 runs it with --trace-gc and prints its collections per request after each measurement;
// BENCH_CPU_PROF=dir has it write a CPU profile into dir when it stops (bench/rest-alloc counts
// what a request allocates); BENCH_SERVERS=gql,page
// measures only those servers.
// BENCH_HISTORY=1 measures only W4 on Dimensio (REST and GraphQL) with the record history of CUST
// on and off (TB_DIM.HISTORY, switched through the metadata API between measurements), the two
// interleaved in every round and their order swapped every other round, and prints on / off.
// BENCH_ROW_SCOPE=1 does the same for W1 and W2 with CUST unscoped and scoped by centro_dett
// (TB_DIM.ROW_SCOPE, issue 37), every row in the bench user's unit, and prints scoped / unscoped.
//
// Each server is a process of its own, as operators run it (Dimensio: `npm start`'s
// scripts/start.mjs with DATABASE_URL; the floor: bench/floor.ts, which loads only pg), and the
// load generator is this process: so each server's peak RSS (VmHWM) is its own, and neither
// shares its event loop with the load generator. A create's measurement of Dimensio ends once its
// relay has published every event the creates wrote (ROLE=all: its CPU and PostgreSQL's for them
// count); the floors write their outbox rows to floor_outbox, which no relay reads.
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import { loginOverHttp } from "../test/helpers/auth.ts";
import { freePort, type Running, spawnStart, waitReady } from "../test/helpers/process.ts";
import { createHash } from "node:crypto";
import { type AutocannonResult, autocannon } from "./autocannon.ts";
import { wsLoad } from "./ws-load.ts";
import {
  allEventsPublished,
  BENCH_CREATE,
  BENCH_CREATE_MUTATION,
  BENCH_PATHS,
  benchEnv,
  benchServiceEnv,
  forgetBenchCreates,
  openBenchServices,
  seedCustomers,
  unpublishedEvents,
} from "./seed.ts";

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

/**
 * Resolves once the process `pid` and PostgreSQL have been idle for QUIET_MS together (less than
 * a clock tick each of CPU): the work a load left behind (the subscribers' last batches behind the
 * relay's last publish, autovacuum) is done, and none of it falls into the next measurement.
 */
const QUIET_MS = 200;
async function quiet(pid: number, timeoutMs = 30_000): Promise<void> {
  const busy = () => processCpuMs(pid) + [...postgresCpu().values()].reduce((a, b) => a + b, 0);
  let last = busy();
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
    await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
    const now = busy();
    if (now - last < 2 * TICK_MS) return;
    last = now;
  }
  // The next measurement then shares the machine with what is still running: say so.
  console.error(`note: Dimensio and PostgreSQL still busy after ${timeoutMs / 1000} s; measuring anyway`);
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

/** Where a Dimensio process's memory is at the end, from its /metrics (prom-client's defaults). */
async function memoryBreakdown(base: string, headers: Record<string, string>): Promise<string> {
  const res = await fetch(`${base}/metrics`, { headers });
  if (!res.ok) return `(GET /metrics answered ${res.status})`;
  const text = await res.text();
  const mb = (pattern: RegExp) => {
    let sum = 0;
    for (const m of text.matchAll(pattern)) sum += Number(m[1]);
    return (sum / 1024 / 1024).toFixed(0);
  };
  const spaces = [
    ...text.matchAll(/^\w*nodejs_heap_space_size_total_bytes\{[^}]*space="(\w+)"[^}]*\} (\S+)$/gm),
  ]
    .map(([, space, bytes]) => `${space} ${(Number(bytes) / 1024 / 1024).toFixed(0)}`)
    .join(", ");
  return `RSS ${mb(/^\w*process_resident_memory_bytes(?:\{[^}]*\})? (\S+)$/gm)}, heap total ${mb(/^\w*nodejs_heap_size_total_bytes(?:\{[^}]*\})? (\S+)$/gm)} (${spaces}), heap used ${mb(/^\w*nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\S+)$/gm)}, external ${mb(/^\w*nodejs_external_memory_bytes(?:\{[^}]*\})? (\S+)$/gm)}`;
}

/** V8's --trace-gc lines of a measurement: each kind's count and time per request. */
function gcSummary(trace: string, requests: number): string {
  const by = new Map<string, { n: number; ms: number }>();
  for (const m of trace.matchAll(/ms: ([A-Z][\w-]*(?: \(reduce\))?) .*?, ([\d.]+) \/ [\d.]+ ms/g)) {
    const kind = by.get(m[1]!) ?? { n: 0, ms: 0 };
    kind.n++;
    kind.ms += Number(m[2]);
    by.set(m[1]!, kind);
  }
  const parts = [...by].map(([kind, { n, ms }]) => `${kind} ×${n} ${((ms * 1000) / requests).toFixed(0)} µs`);
  return `GC per request: ${parts.join(", ") || "none"}`;
}

/** Peak resident memory of a process (VmHWM), in MB. */
function peakRssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmHWM:"));
  return Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024);
}

/** A bench server (bench/floor.ts, bench/postgraphile.ts) as a process of its own: its port. */
function startScript(
  script: string,
  url: string,
  marker: string,
): Promise<{ base: string; pid: number; stop: () => void }> {
  const child = spawn(process.execPath, ["--import", "tsx", script, url], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, GRAPHILE_ENV: "production" },
  });
  return new Promise((resolve, reject) => {
    let out = "";
    child.stdout.on("data", (d) => {
      out += String(d);
      const m = new RegExp(`${marker}=(\\d+)`).exec(out);
      if (m)
        resolve({ base: `http://127.0.0.1:${m[1]}`, pid: child.pid!, stop: () => child.kill("SIGTERM") });
    });
    child.on("exit", (code) => reject(new Error(`${script} exited with ${code}`)));
  });
}

async function startDimensio(url: string): Promise<{ base: string; running: Running }> {
  const port = await freePort();
  const running = spawnStart(
    {
      ...benchServiceEnv(url, port, `/tmp/dimensio-bench-${process.pid}`),
      // The WebSocket runs' sockets of one user: more than the default 20 while one run's close.
      WS_MAX_SOCKETS_PER_USER: "1000",
      // BENCH_ROLE: run Dimensio as one backend role (e.g. write: no relay or subscribers in it).
      ...(process.env.BENCH_ROLE ? { ROLE: process.env.BENCH_ROLE, GATEWAY_SECRET: BENCH_SECRET } : {}),
      // BENCH_NODE_OPTIONS: V8 settings of the Dimensio process (e.g. --max-semi-space-size=4).
      ...(process.env.BENCH_NODE_OPTIONS ? { NODE_OPTIONS: process.env.BENCH_NODE_OPTIONS } : {}),
      // BENCH_ENV: more settings of the Dimensio process, e.g. EVENTS_GATHER_MS=20,LOG_LEVEL=info.
      ...benchEnv(),
    },
    // BENCH_GC=1: V8 traces its collections, summed per measurement (gcSummary); BENCH_CPU_PROF=dir:
    // the process writes a CPU profile there when it stops (bench/summarise-profile.mjs reads it).
    [
      // BENCH_NODE_ARGS: V8 flags after npm start's own (which NODE_OPTIONS cannot override).
      ...(process.env.BENCH_NODE_ARGS ? process.env.BENCH_NODE_ARGS.split(" ") : []),
      ...(process.env.BENCH_GC ? ["--trace-gc"] : []),
      ...(process.env.BENCH_CPU_PROF ? ["--cpu-prof", `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : []),
    ],
  );
  const base = `http://127.0.0.1:${port}`;
  await waitReady(base, running);
  return { base, running };
}

const BENCH_SECRET = "bench-gateway-secret";

type ServerName = "page" | "floor" | "pgl" | "rest" | "gql" | "gqlp" | "gqlws";
const SERVERS: ReadonlyArray<[ServerName, string]> = [
  ["page", "page-only floor"],
  ["floor", "floor (same SQL)"],
  ["pgl", "PostGraphile 5"],
  ["rest", "Dimensio REST"],
  ["gql", "Dimensio GraphQL"],
  ["gqlp", "GraphQL persisted"],
  ["gqlws", "GraphQL over WebSocket"],
];
/** Dimensio's servers (one process): what a create's measurement waits for the events of. */
const DIMENSIO: ReadonlySet<ServerName> = new Set(["rest", "gql", "gqlp", "gqlws"]);
/**
 * The servers in the order of a round. Dimensio's REST and GraphQL share one process, so whatever
 * one leaves behind (garbage in V8's old generation, work queued for the event side) could fall
 * into the other's measurement: they swap places every other round, so that neither always comes
 * second. (GraphQL's W4 cost more in either order: docs/benchmarks.md.)
 */
function serverOrder(round: number): ServerName[] {
  const all = SERVERS.map(([server]) => server);
  const order = round % 2 === 0 ? all : all.map((s) => (s === "rest" ? "gql" : s === "gql" ? "rest" : s));
  // BENCH_SERVERS=gql,page: only those are measured (e.g. one API alone under a CPU profile);
  // filtered after the swap, so that a round never measures a server left out.
  const only = process.env.BENCH_SERVERS?.split(",");
  return order.filter((s) => !only || only.includes(s));
}
type Run = {
  url: string;
  method?: string;
  body?: string;
  headers?: Record<string, string>;
  /** A GraphQL operation: what its persisted and WebSocket runs send. */
  graphql?: { query: string; variables?: Record<string, unknown> };
  /** Sent over WebSocket (url a ws: URL) with this token, not over HTTP. */
  wsToken?: string;
};

/** A run's load for `duration` seconds over `connections`: HTTP by autocannon, else WebSocket. */
function loadRun(run: Run, connections: number, duration: number): Promise<AutocannonResult> {
  if (run.wsToken && run.graphql)
    return wsLoad({ url: run.url, token: run.wsToken, ...run.graphql, connections, duration });
  return autocannon({ ...run, connections, duration });
}
interface Workload {
  name: string;
  runs: Partial<Record<ServerName, Run>>;
  /** Its requests create customers (named BENCH_CREATE.NAME) and write events. */
  creates?: boolean;
}
interface Measured {
  rps: number;
  cpu: number;
  pg: number;
  p50: number;
  p99: number;
  failed: number;
  /** Dimensio's creates: outbox rows not yet published when the load stopped. */
  backlog?: number | undefined;
}

// The fields a list shows anna (NOTES and EMAIL are not listed), the same in every server.
const CUST_FIELDS = "CUST_ID CODE NAME CITY_ID CREDIT_LIMIT VIP SALES_REP TREC CDATA OWNER LDATA LOWNER";
const PGL_CUST_FIELDS = "custId code name cityId creditLimit vip salesRep trec cdata owner ldata lowner";

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
  // The page-only floor's tables: the tenant's rows without a tenant column, with the indexes its
  // statements need: the key, one per foreign key and per INDEXED field (src/ddl/sync.ts closes
  // those with the id for its stable order's tie-break, which the floor's statements do not ask).
  for (const statement of [
    `CREATE TABLE floor_cust AS SELECT "CUST_ID", "CODE", "NAME", "CITY_ID", "EMAIL", "CREDIT_LIMIT", "VIP", "NOTES", "SALES_REP", "TREC", "CDATA", "OWNER", "LDATA", "LOWNER"
       FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme'`,
    `ALTER TABLE floor_cust ADD PRIMARY KEY ("CUST_ID")`,
    `ALTER TABLE floor_cust ALTER "CUST_ID" ADD GENERATED BY DEFAULT AS IDENTITY (START WITH 100000000)`,
    `CREATE INDEX ON floor_cust ("CITY_ID")`,
    `CREATE INDEX ON floor_cust ("NAME")`,
    `CREATE TABLE floor_ord AS SELECT "ORD_ID", "ORD_NO", "CUST_ID", "ORD_DATE", "STATUS", "TOTAL", "CREATED_IN", "TREC", "CDATA", "OWNER", "LDATA", "LOWNER"
       FROM "TB_DOC_ORD00" WHERE "TENANT_ID" = 'acme'`,
    `ALTER TABLE floor_ord ADD PRIMARY KEY ("ORD_ID")`,
    `CREATE INDEX ON floor_ord ("CUST_ID")`,
    `ANALYZE floor_cust, floor_ord`,
    // The floor's outbox rows: TB_ANAG_OUTBOX00's shape and indexes, out of Dimensio's relay's way
    // (the floor's creates left thousands of events for Dimensio's process to publish while the
    // next servers were measured).
    `CREATE TABLE floor_outbox (LIKE "TB_ANAG_OUTBOX00" INCLUDING ALL)`,
    // PostGraphile's W3: the order's customer as a relation. The dimension tables have no
    // foreign-key constraints (the relations live in the metadata), so it is declared to
    // PostGraphile by a smart comment (a "fake constraint"), on the key the tables are indexed by.
    `COMMENT ON TABLE "TB_DOC_ORD00" IS E'@foreignKey ("TENANT_ID", "CUST_ID") references "TB_ANAG_CUST00" ("TENANT_ID", "CUST_ID")|@fieldName customer'`,
  ])
    await services.db.query(statement);
  // The bulk load's dirty pages written now, not during the first measurements.
  await services.db.query("CHECKPOINT");
  const url = services.db.connectionString;
  let floor: Awaited<ReturnType<typeof startScript>> | null = null;
  let pgl: Awaited<ReturnType<typeof startScript>> | null = null;
  let pglMissing: string | null = process.env.BENCH_POSTGRAPHILE === "0" ? "BENCH_POSTGRAPHILE=0" : null;
  let dimensio: Awaited<ReturnType<typeof startDimensio>> | null = null;
  try {
    // Started inside the try: a server that fails to start stops the others and drops the data.
    floor = await startScript("bench/floor.ts", url, "FLOOR_PORT");
    const floorBase = floor.base;
    if (!pglMissing) {
      try {
        pgl = await startScript("bench/postgraphile.ts", url, "POSTGRAPHILE_PORT");
      } catch (err) {
        pglMissing = String(err);
      }
    }
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
    const create = JSON.stringify({ data: BENCH_CREATE });
    const numbered = JSON.stringify({ data: { NAME: BENCH_CREATE.NAME } });
    const json = { "content-type": "application/json" };
    const post = (target: string, body: string, headers: Record<string, string> = {}): Run => ({
      url: target,
      method: "POST",
      body,
      headers: { ...headers, ...json },
    });
    const dimensioCreate = (body: string) => post(`${base}${BENCH_PATHS.create}`, body, auth);
    const gql = (query: string, variables?: Record<string, unknown>): Run => ({
      ...post(`${base}/graphql`, JSON.stringify({ query, variables }), auth),
      graphql: { query, ...(variables ? { variables } : {}) },
    });
    const pglQuery = (query: string, variables?: Record<string, unknown>) =>
      pgl ? post(`${pgl.base}/graphql`, JSON.stringify({ query, variables })) : undefined;
    const workloads: Workload[] = [
      {
        name: "W1 list 20 customers of a city, sorted by name (REST: + total; GraphQL, PostGraphile, page floor: no total)",
        runs: {
          page: { url: `${floorBase}/p1?city=MI` },
          floor: { url: `${floorBase}/w1?city=MI` },
          pgl: pglQuery(
            `{ allTbAnagCust00S(condition: {tenantId: "acme", cityId: "MI"}, orderBy: NAME_ASC, first: 20) { nodes { ${PGL_CUST_FIELDS} } } }`,
          ),
          rest: {
            url: `${base}${BENCH_PATHS.list}`,
            headers: auth,
          },
          gql: gql(
            `{ CUST(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}, order_by: [{NAME: asc}], limit: 20) { data { ${CUST_FIELDS} } } }`,
          ),
        },
      },
      {
        name: "W1v W1 with the city as a variable (GraphQL, PostGraphile; the floors as W1)",
        runs: {
          page: { url: `${floorBase}/p1?city=MI` },
          floor: { url: `${floorBase}/w1?city=MI` },
          pgl: pglQuery(
            `query($c: String!) { allTbAnagCust00S(condition: {tenantId: "acme", cityId: $c}, orderBy: NAME_ASC, first: 20) { nodes { ${PGL_CUST_FIELDS} } } }`,
            { c: "MI" },
          ),
          gql: gql(
            `query($c: String!) { CUST(source: "anag-1", where: {CITY_ID: {_eq: $c}}, order_by: [{NAME: asc}], limit: 20) { data { ${CUST_FIELDS} } } }`,
            { c: "MI" },
          ),
        },
      },
      {
        name: "W2 get a customer by id",
        runs: {
          page: { url: `${floorBase}/p2?id=${id}` },
          floor: { url: `${floorBase}/w2?id=${id}` },
          pgl: pglQuery(
            `{ tbAnagCust00ByTenantIdAndCustId(tenantId: "acme", custId: "${id}") { ${PGL_CUST_FIELDS} } }`,
          ),
          rest: { url: `${base}${BENCH_PATHS.byId(id)}`, headers: auth },
          gql: gql(`{ CUST_by_id(source: "anag-1", id: "${id}") { ${CUST_FIELDS} } }`),
        },
      },
      {
        name: "W3 latest 20 orders, each with its customer",
        runs: {
          page: { url: `${floorBase}/p3` },
          floor: { url: `${floorBase}/w3` },
          pgl: pglQuery(
            `{ allTbDocOrd00S(condition: {tenantId: "acme"}, orderBy: ORD_ID_DESC, first: 20) { nodes { ordId ordNo custId ordDate status total trec cdata owner ldata lowner customer { custId code name cityId } } } }`,
          ),
          rest: {
            url: `${base}${BENCH_PATHS.orders}`,
            headers: auth,
          },
          gql: gql(
            `{ ORD(source: "sales-1", order_by: [{ORD_ID: desc}], limit: 20) { data { ORD_ID ORD_NO CUST_ID ORD_DATE STATUS TOTAL TREC CDATA OWNER LDATA LOWNER CUST { CUST_ID CODE NAME CITY_ID } } } }`,
          ),
        },
      },
      {
        name: "W4 create a customer, its code given (floor: the row and its outbox row in one statement; page floor: the bare INSERT)",
        creates: true,
        runs: {
          page: post(`${floorBase}/p4`, create),
          floor: post(`${floorBase}/w4o`, create),
          pgl: pglQuery(
            `mutation { createTbAnagCust00(input: {tbAnagCust00: {name: "${BENCH_CREATE.NAME}", code: "${BENCH_CREATE.CODE}", trec: "N", cdata: "20260101000000", owner: "pgl", tenantId: "acme"}}) { tbAnagCust00 { custId } } }`,
          ),
          rest: dimensioCreate(create),
          gql: gql(BENCH_CREATE_MUTATION),
        },
      },
      {
        name: "W4s create a customer numbered by the gap-free counter (floor: counter, row and outbox row in one statement)",
        creates: true,
        runs: { floor: post(`${floorBase}/w4s`, numbered), rest: dimensioCreate(numbered) },
      },
      {
        name: "W5 count customers of a city",
        runs: {
          page: { url: `${floorBase}/p5?city=MI` },
          floor: { url: `${floorBase}/w5?city=MI` },
          pgl: pglQuery(`{ allTbAnagCust00S(condition: {tenantId: "acme", cityId: "MI"}) { totalCount } }`),
          rest: { url: `${base}${BENCH_PATHS.count}`, headers: auth },
          gql: gql(`{ CUST_count(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}) }`),
        },
      },
    ];
    // Each GraphQL run again as a persisted operation (its hash alone, registered here once) and
    // over WebSocket.
    const wsBase = `${base.replace(/^http/, "ws")}/graphql`;
    for (const w of workloads) {
      const operation = w.runs.gql?.graphql;
      if (!operation) continue;
      const sha256Hash = createHash("sha256").update(operation.query).digest("hex");
      const persistedQuery = { version: 1, sha256Hash };
      const registered = await fetch(`${base}/graphql`, {
        method: "POST",
        headers: { ...auth, ...json },
        body: JSON.stringify({ ...operation, extensions: { persistedQuery } }),
      });
      if (registered.status !== 200) throw new Error(`registering ${w.name}: ${registered.status}`);
      await registered.arrayBuffer();
      w.runs.gqlp = post(
        `${base}/graphql`,
        JSON.stringify({ variables: operation.variables, extensions: { persistedQuery } }),
        auth,
      );
      w.runs.gqlws = { url: wsBase, graphql: operation, wsToken: token };
    }
    // BENCH_WORKLOADS=W4,W4s runs only those (their names' first word).
    const only = process.env.BENCH_WORKLOADS?.split(",");
    if (only)
      workloads.splice(0, workloads.length, ...workloads.filter((w) => only.includes(w.name.split(" ")[0]!)));
    const pidOf: Record<ServerName, number | undefined> = {
      page: floor.pid,
      floor: floor.pid,
      pgl: pgl?.pid,
      rest: dimensio.running.child.pid,
      gql: dimensio.running.child.pid,
      gqlp: dimensio.running.child.pid,
      gqlws: dimensio.running.child.pid,
    };
    // Each run answers as it should once (a GraphQL error is a 200 that autocannon would count).
    for (const w of workloads) {
      for (const [server, run] of Object.entries(w.runs) as Array<[ServerName, Run | undefined]>) {
        if (!run) continue;
        if (run.wsToken) {
          const once = await loadRun(run, 1, 0.1);
          if (once.errors || !once.requests.total)
            throw new Error(`${w.name.split(" ")[0]} ${server}: ${once.errors} errors over WebSocket`);
          continue;
        }
        const res = await fetch(run.url, {
          method: run.method ?? "GET",
          headers: run.headers,
          body: run.body,
        });
        const text = await res.text();
        if (res.status >= 300 || text.includes('"errors"'))
          throw new Error(`${w.name.split(" ")[0]} ${server}: ${res.status} ${text.slice(0, 300)}`);
      }
    }
    const before = cpuTimes();
    const load = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    // Warm-up: every endpoint once for a second (connections, plans, JIT of the processes).
    for (const w of workloads) for (const run of Object.values(w.runs)) if (run) await loadRun(run, 4, 1);
    // The customers the creates made go again (the page floor's from floor_cust too), so that
    // every read measures the seeded data: they are named "Bench create", which sorts before the
    // seeded "Bench customer …", so that W1's scan in NAME order would otherwise step over
    // thousands of them (W1 after a warm-up with creates cost PostgreSQL 2.7 ms per request
    // instead of 0.3, the page floor's 0.54 instead of 0.25). The caches are told.
    const forgetCreates = async () => {
      await forgetBenchCreates(services.db);
      await services.db.query(`DELETE FROM floor_cust WHERE "NAME" = $1`, [BENCH_CREATE.NAME]);
      await services.db.query(`VACUUM ANALYZE floor_cust`);
      await services.db.query(`SELECT pg_notify('dimensio_outbox', '')`);
      await eventsPublished();
      await quiet(pidOf.rest!);
    };
    /**
     * Waits until Dimensio's relay has published every event (BENCH_ROLE: no relay runs): a
     * create workload's measurement of Dimensio ends there, so that the CPU its events cost counts
     * as its own and none of it falls into the next server's measurement.
     */
    const eventsPublished = async () => {
      if (!process.env.BENCH_ROLE) await allEventsPublished(services.db);
    };
    await forgetCreates();
    const measure = async (pid: number, run: Run, dimensioCreates: boolean): Promise<Measured> => {
      const running = dimensio!.running;
      const gcFrom = running.output().length;
      const cpu0 = processCpuMs(pid);
      const pg0 = postgresCpu();
      const r = await loadRun(run, CONNECTIONS, SECONDS);
      let backlog: number | undefined;
      if (dimensioCreates) {
        // The outbox's backlog when the load stopped: a relay that fell behind would leave work
        // after the window that the req/s do not pay for (its CPU still counts: measured to quiet).
        if (!process.env.BENCH_ROLE) backlog = await unpublishedEvents(services.db);
        // Published is not done: the subscribers (search, analytics, notifications, webhook
        // matching) may still be working through the bus's queues. Their CPU is the creates' own:
        // measured until the process and PostgreSQL are quiet, not left to the next measurement
        // (GraphQL's, right after REST's in the same process).
        await eventsPublished();
        await quiet(pid);
      }
      const served = Math.max(1, r.requests.total);
      if (process.env.BENCH_GC && pid === running.child.pid)
        console.error(`  ${gcSummary(running.output().slice(gcFrom), served)}`);
      return {
        rps: r.requests.average,
        cpu: (processCpuMs(pid) - cpu0) / served,
        pg: postgresCpuMsSince(pg0) / served,
        p50: r.latency.p50,
        p99: r.latency.p99,
        failed: r.non2xx + r.errors,
        backlog,
      };
    };
    if (process.env.BENCH_HISTORY) {
      const w4 = workloads.find((w) => w.name.startsWith("W4 "))!;
      await measureHistory(w4, {
        base,
        auth,
        pid: pidOf.rest!,
        measure,
        forgetCreates: async () => {
          await services.db.query(`DELETE FROM "TB_HISTORY" WHERE "DIMENSION" = 'CUST'`);
          await services.db.query(`VACUUM ANALYZE "TB_HISTORY"`);
          await forgetCreates();
        },
      });
      return;
    }
    if (process.env.BENCH_ROW_SCOPE) {
      await measureRowScope(
        workloads.filter((w) => w.name.startsWith("W1 ") || w.name.startsWith("W2 ")),
        {
          base,
          auth,
          pid: pidOf.rest!,
          measure,
          // Every customer in the bench user's unit (anna, HQ): the same rows either way, so the
          // difference is the scope's own cost (its predicate, its index, its plan).
          placeRows: async () => {
            await services.db.query(
              `UPDATE "TB_ANAG_CUST00" SET "CENTRO_DETT" = 'HQ' WHERE "CENTRO_DETT" IS DISTINCT FROM 'HQ'`,
            );
            await services.db.query(`VACUUM ANALYZE "TB_ANAG_CUST00"`);
          },
          clearRows: async () => {
            const { rows } = await services.db.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM information_schema.columns WHERE table_name = 'TB_ANAG_CUST00' AND column_name = 'CENTRO_DETT'`,
            );
            if (rows[0]?.n) await services.db.query(`UPDATE "TB_ANAG_CUST00" SET "CENTRO_DETT" = NULL`);
          },
        },
      );
      return;
    }
    const results: Array<{ w: Workload; by: Partial<Record<ServerName, Measured>> }> = [];
    for (const w of workloads) {
      const rounds: Partial<Record<ServerName, Measured[]>> = {};
      for (let round = 0; round < ROUNDS; round++) {
        for (const server of serverOrder(round)) {
          const run = w.runs[server];
          if (!run) continue;
          const m = await measure(pidOf[server]!, run, !!w.creates && DIMENSIO.has(server));
          if (m.failed) console.error(`${w.name.split(" ")[0]} ${server}: ${m.failed} failed requests`);
          // Each round on stderr: the spread behind the median the tables show.
          console.error(
            `  ${w.name.split(" ")[0]} ${server} round ${round + 1}: ${m.rps.toFixed(0)} req/s, CPU ${m.cpu.toFixed(2)} / ${m.pg.toFixed(2)} ms, p50 ${m.p50} ms, p99 ${m.p99} ms${m.backlog === undefined ? "" : `, outbox backlog at the end ${m.backlog}`}`,
          );
          const list = rounds[server] ?? [];
          list.push(m);
          rounds[server] = list;
          // Every server's creates start from the same table: the rows the previous server created
          // (and the autovacuum and analyze they would set off) go before the next one is measured.
          if (w.creates) await forgetCreates();
        }
      }
      // Each server's median round (by req/s).
      const by: Partial<Record<ServerName, Measured>> = {};
      for (const [server, list] of Object.entries(rounds) as Array<[ServerName, Measured[]]>) {
        list.sort((a, b) => a.rps - b.rps);
        by[server] = list[Math.floor(list.length / 2)]!;
      }
      results.push({ w, by });
      console.error(`done: ${w.name.split(" ")[0]}`);
    }
    const after = cpuTimes();
    const steal = ((after.steal - before.steal) / Math.max(1, after.total - before.total)) * 100;
    const loadAfter = readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
    console.log(
      `\n${CUSTOMERS} customers, ${ORDERS} orders, ${CONNECTIONS} connections, ${SECONDS} s per run, ${ROUNDS} round(s); Node ${process.version}; CPU steal ${steal.toFixed(1)} %; load average ${load} before, ${loadAfter} after${pglMissing ? `; PostGraphile not run: ${pglMissing}` : ""}\n`,
    );
    const cell = (m: Measured | undefined) => (m ? m.rps.toFixed(0) : "–");
    const ratio = (a: Measured | undefined, b: Measured | undefined) =>
      a && b ? (a.rps / b.rps).toFixed(2) : "–";
    console.log(
      `| workload | ${SERVERS.map(([, label]) => `${label} req/s`).join(" | ")} | REST / page floor | REST / floor | GraphQL / PostGraphile | persisted / PostGraphile | WebSocket / PostGraphile | persisted / GraphQL | WebSocket / GraphQL | GraphQL / page floor |`,
    );
    console.log(`|---|${SERVERS.map(() => "---:").join("|")}|---:|---:|---:|---:|---:|---:|---:|---:|`);
    for (const { w, by } of results) {
      console.log(
        `| ${w.name} | ${SERVERS.map(([s]) => cell(by[s])).join(" | ")} | ${ratio(by.rest, by.page)} | ${ratio(by.rest, by.floor)} | ${ratio(by.gql, by.pgl)} | ${ratio(by.gqlp, by.pgl)} | ${ratio(by.gqlws, by.pgl)} | ${ratio(by.gqlp, by.gql)} | ${ratio(by.gqlws, by.gql)} | ${ratio(by.gql, by.page)} |`,
      );
    }
    console.log(
      `\nCPU ms per request, the server's process / all PostgreSQL processes; p99 ms:\n\n| workload | ${SERVERS.map(([, label]) => label).join(" | ")} |`,
    );
    console.log(`|---|${SERVERS.map(() => "---:").join("|")}|`);
    for (const { w, by } of results) {
      console.log(
        `| ${w.name.split(" ")[0]} | ${SERVERS.map(([s]) => {
          const m = by[s];
          return m ? `${m.cpu.toFixed(2)} / ${m.pg.toFixed(2)}; ${m.p99}` : "–";
        }).join(" | ")} |`,
      );
    }
    console.log(
      `\npeak RSS of the servers' processes: floors ${peakRssMb(floor.pid)} MB${pgl ? `, PostGraphile ${peakRssMb(pgl.pid)} MB` : ""}, Dimensio ${peakRssMb(dimensio.running.child.pid!)} MB`,
    );
    console.log(
      `Dimensio's memory at the end (MB): ${await memoryBreakdown(base, process.env.BENCH_ROLE ? { "x-gateway-secret": BENCH_SECRET } : {})}`,
    );
  } finally {
    floor?.stop();
    pgl?.stop();
    if (dimensio && dimensio.running.child.exitCode === null) {
      dimensio.running.child.kill("SIGTERM");
      await dimensio.running.exited;
    }
    await services.close();
  }
}

/**
 * BENCH_HISTORY=1: W4 over REST and GraphQL with CUST's record history on and off, interleaved:
 * every round measures each API with history off and on (which comes first swaps every other
 * round), TB_DIM.HISTORY switched through the metadata API (the process reloads its metadata at
 * once), a second of warm-up after each switch (the new version's statements prepared). Prints
 * each pair's ratio and the medians.
 */
async function measureHistory(
  w4: Workload,
  opts: {
    base: string;
    auth: Record<string, string>;
    pid: number;
    measure: (pid: number, run: Run, dimensioCreates: boolean) => Promise<Measured>;
    forgetCreates: () => Promise<void>;
  },
): Promise<void> {
  const setHistory = async (on: boolean) => {
    const res = await fetch(`${opts.base}/api/v4/core/DIM/CUST?source=erp`, {
      method: "PATCH",
      headers: { ...opts.auth, "content-type": "application/json" },
      body: JSON.stringify({ data: { HISTORY: on } }),
    });
    if (res.status !== 200) throw new Error(`TB_DIM.HISTORY ${on}: ${res.status} ${await res.text()}`);
  };
  const pairs: Record<"rest" | "gql", Array<{ off: Measured; on: Measured }>> = { rest: [], gql: [] };
  for (let round = 0; round < ROUNDS; round++) {
    const apis: Array<"rest" | "gql"> = round % 2 ? ["gql", "rest"] : ["rest", "gql"];
    for (const api of apis) {
      const run = w4.runs[api]!;
      const measured: Partial<Record<"on" | "off", Measured>> = {};
      for (const on of round % 2 ? [true, false] : [false, true]) {
        await setHistory(on);
        await autocannon({ ...run, connections: 4, duration: 1 });
        await opts.forgetCreates();
        const m = await opts.measure(opts.pid, run, true);
        measured[on ? "on" : "off"] = m;
        console.error(
          `  W4 ${api} history ${on ? "on " : "off"} round ${round + 1}: ${m.rps.toFixed(0)} req/s, CPU ${m.cpu.toFixed(2)} / ${m.pg.toFixed(2)} ms, p99 ${m.p99} ms${m.failed ? `, ${m.failed} failed` : ""}`,
        );
        await opts.forgetCreates();
      }
      pairs[api].push({ off: measured.off!, on: measured.on! });
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  console.log(
    `
W4 with CUST's record history on and off: ${CONNECTIONS} connections, ${SECONDS} s per run, ${ROUNDS} round(s); Node ${process.version}
`,
  );
  console.log(
    "| API | history off req/s | history on req/s | on / off (median of rounds' ratios) | rounds' ratios | CPU ms per request off → on (process / PostgreSQL) |",
  );
  console.log("|---|---:|---:|---:|---|---|");
  for (const api of ["rest", "gql"] as const) {
    const list = pairs[api];
    const ratios = list.map((p) => p.on.rps / p.off.rps);
    const m = (k: "on" | "off", f: (x: Measured) => number) => median(list.map((p) => f(p[k])));
    console.log(
      `| ${api === "rest" ? "REST" : "GraphQL"} | ${m("off", (x) => x.rps).toFixed(0)} | ${m("on", (x) => x.rps).toFixed(0)} | ${median(ratios).toFixed(3)} | ${ratios.map((r) => r.toFixed(2)).join(", ")} | ${m("off", (x) => x.cpu).toFixed(2)} / ${m("off", (x) => x.pg).toFixed(2)} → ${m("on", (x) => x.cpu).toFixed(2)} / ${m("on", (x) => x.pg).toFixed(2)} |`,
    );
  }
}

/**
 * BENCH_ROW_SCOPE=1 (issue 37): W1 and W2 over REST and GraphQL with CUST unscoped and scoped by
 * centro_dett (TB_DIM.ROW_SCOPE switched through the metadata API; the DDL sync adds the column and
 * its index), interleaved as BENCH_HISTORY's are; every row is in the bench user's unit, so both
 * answer the same rows. Prints scoped / unscoped per workload and API.
 */
async function measureRowScope(
  workloads: Workload[],
  opts: {
    base: string;
    auth: Record<string, string>;
    pid: number;
    measure: (pid: number, run: Run, dimensioCreates: boolean) => Promise<Measured>;
    placeRows: () => Promise<void>;
    clearRows: () => Promise<void>;
  },
): Promise<void> {
  const setScope = async (on: boolean) => {
    // The DDL sync refuses to drop a column that holds values: the units go before the scope does.
    if (!on) await opts.clearRows();
    const res = await fetch(`${opts.base}/api/v4/core/DIM/CUST?source=erp`, {
      method: "PATCH",
      headers: { ...opts.auth, "content-type": "application/json" },
      body: JSON.stringify({ data: { ROW_SCOPE: on ? "centro_dett" : null } }),
    });
    if (res.status !== 200) throw new Error(`TB_DIM.ROW_SCOPE ${on}: ${res.status} ${await res.text()}`);
    if (on) await opts.placeRows();
  };
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const rows: string[] = [];
  for (const w of workloads) {
    for (const api of ["rest", "gql"] as const) {
      const run = w.runs[api]!;
      const pairs: Array<{ off: Measured; on: Measured }> = [];
      for (let round = 0; round < ROUNDS; round++) {
        const measured: Partial<Record<"on" | "off", Measured>> = {};
        for (const on of round % 2 ? [true, false] : [false, true]) {
          await setScope(on);
          await autocannon({ ...run, connections: 4, duration: 1 });
          const m = await opts.measure(opts.pid, run, false);
          if (m.failed) throw new Error(`${w.name} ${api} scope ${on}: ${m.failed} failed requests`);
          measured[on ? "on" : "off"] = m;
          console.error(
            `  ${w.name.split(" ")[0]} ${api} scope ${on ? "on " : "off"} round ${round + 1}: ${m.rps.toFixed(0)} req/s, CPU ${m.cpu.toFixed(2)} / ${m.pg.toFixed(2)} ms, p99 ${m.p99} ms`,
          );
        }
        pairs.push({ off: measured.off!, on: measured.on! });
      }
      const ratios = pairs.map((p) => p.on.rps / p.off.rps);
      const m = (k: "on" | "off", f: (x: Measured) => number) => median(pairs.map((p) => f(p[k])));
      rows.push(
        `| ${w.name.split(" ")[0]} | ${api === "rest" ? "REST" : "GraphQL"} | ${m("off", (x) => x.rps).toFixed(0)} | ${m("on", (x) => x.rps).toFixed(0)} | ${median(ratios).toFixed(3)} | ${ratios.map((r) => r.toFixed(2)).join(", ")} | ${m("off", (x) => x.cpu).toFixed(2)} / ${m("off", (x) => x.pg).toFixed(2)} → ${m("on", (x) => x.cpu).toFixed(2)} / ${m("on", (x) => x.pg).toFixed(2)} |`,
      );
    }
  }
  await setScope(false);
  console.log(
    `\nW1 and W2 with CUST unscoped and scoped by centro_dett: ${CONNECTIONS} connections, ${SECONDS} s per run, ${ROUNDS} round(s); Node ${process.version}\n`,
  );
  console.log(
    "| workload | API | unscoped req/s | scoped req/s | scoped / unscoped (median of rounds' ratios) | rounds' ratios | CPU ms per request unscoped → scoped (process / PostgreSQL) |",
  );
  console.log("|---|---|---:|---:|---:|---|---|");
  for (const r of rows) console.log(r);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
