// Where the memory of a Dimensio process under load goes (issue 19's peak RSS): starts the service
// as `npm start` runs it on a scratch PostgreSQL database (the sample fixture, BENCH_CUSTOMERS
// customers and as many orders), drives bench/compare's reads and creates over REST and GraphQL
// with autocannon (BENCH_SECONDS each, 16 connections), then prints the process's peak RSS
// (VmHWM), its /metrics memory figures, and the live heap of a heap snapshot summed by
// constructor (the largest first). BENCH_NODE_ARGS adds node and V8 flags to the service's command
// line (V8's flags are not allowed in NODE_OPTIONS), e.g. BENCH_NODE_ARGS=--optimize-for-size.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/memory.ts
import { mkdirSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { loginOverHttp } from "../test/helpers/auth.ts";
import { freePort, spawnStart, waitReady } from "../test/helpers/process.ts";
import { autocannon } from "./autocannon.ts";
import {
  BENCH_CREATE,
  BENCH_CREATE_MUTATION,
  BENCH_PATHS,
  benchServiceEnv,
  openBenchServices,
  seedCustomers,
  seedOrders,
} from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 20_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 4);

const statusOf = (pid: number, key: string) =>
  Number(
    readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith(`${key}:`))
      ?.split(/\s+/)[1] ?? 0,
  ) / 1024;

/** Self size per constructor of a .heapsnapshot (V8's format: nodes as flat arrays of fields). */
function summariseSnapshot(file: string, top = 25): string {
  const snap = JSON.parse(readFileSync(file, "utf8")) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snap.snapshot.meta.node_fields;
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const types = snap.snapshot.meta.node_types[0];
  const by = new Map<string, { bytes: number; count: number }>();
  let total = 0;
  for (let i = 0; i < snap.nodes.length; i += width) {
    const type = types[snap.nodes[i + typeAt]!]!;
    const name =
      type === "object" || type === "closure" ? snap.strings[snap.nodes[i + nameAt]!]! : `(${type})`;
    const bytes = snap.nodes[i + sizeAt]!;
    total += bytes;
    const e = by.get(name) ?? { bytes: 0, count: 0 };
    e.bytes += bytes;
    e.count++;
    by.set(name, e);
  }
  const rows = [...by.entries()].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, top);
  return [
    `live heap in the snapshot: ${(total / 1024 / 1024).toFixed(1)} MB`,
    "| constructor or type | MB | count |",
    "|---|---:|---:|",
    ...rows.map(
      ([n, e]) =>
        `| ${n.slice(0, 60).replaceAll("|", "\\|")} | ${(e.bytes / 1024 / 1024).toFixed(2)} | ${e.count} |`,
    ),
  ].join("\n");
}

async function main() {
  const services = await openBenchServices();
  if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
  const url = services.db.connectionString;
  const dir = path.join(tmpdir(), `dimensio-memory-${process.pid}`);
  let child: ReturnType<typeof spawnStart> | null = null;
  try {
    mkdirSync(dir, { recursive: true });
    await seedCustomers(services.db, CUSTOMERS, ["MI", "RM", "TO", "MUC"]);
    await seedOrders(services.db, CUSTOMERS, CUSTOMERS);
    const port = await freePort();
    child = spawnStart(benchServiceEnv(url, port, dir), [
      "--heapsnapshot-signal=SIGUSR2",
      `--diagnostic-dir=${dir}`,
      ...(process.env.BENCH_NODE_ARGS ?? "").split(/\s+/).filter(Boolean),
    ]);
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, child);
    const pid = child.child.pid!;
    console.log(`after start: RSS ${statusOf(pid, "VmRSS").toFixed(0)} MB`);
    const token = await loginOverHttp(base, "anna", "anna-secret-1");
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
    const fields = "CUST_ID CODE NAME CITY_ID CREDIT_LIMIT VIP SALES_REP TREC CDATA OWNER LDATA LOWNER";
    const gql = (query: string) => ({ method: "POST", body: JSON.stringify({ query }) });
    const runs: Array<[string, { path: string; method?: string; body?: string }]> = [
      ["REST list", { path: BENCH_PATHS.list }],
      ["REST by id", { path: BENCH_PATHS.byId(5000) }],
      ["REST orders", { path: BENCH_PATHS.orders }],
      [
        "REST create",
        {
          path: BENCH_PATHS.create,
          method: "POST",
          body: JSON.stringify({ data: BENCH_CREATE }),
        },
      ],
      [
        "GraphQL list",
        {
          path: "/graphql",
          ...gql(
            `{ CUST(source: "anag-1", where: {CITY_ID: {_eq: "MI"}}, order_by: [{NAME: asc}], limit: 20) { data { ${fields} } } }`,
          ),
        },
      ],
      [
        "GraphQL create",
        {
          path: "/graphql",
          ...gql(BENCH_CREATE_MUTATION),
        },
      ],
    ];
    for (const [name, run] of runs) {
      const r = await autocannon({
        url: `${base}${run.path}`,
        connections: 16,
        duration: SECONDS,
        headers,
        ...(run.method ? { method: run.method } : {}),
        ...(run.body ? { body: run.body } : {}),
      });
      console.log(
        `${name}: ${r.requests.average.toFixed(0)} req/s, non-2xx ${r.non2xx}; RSS ${statusOf(pid, "VmRSS").toFixed(0)} MB, peak ${statusOf(pid, "VmHWM").toFixed(0)} MB`,
      );
    }
    const metrics = await (await fetch(`${base}/metrics`)).text();
    for (const line of metrics.split("\n"))
      if (/(resident_memory|heap_size_(total|used)|external_memory|heap_space_size_total)_bytes/.test(line))
        if (!line.startsWith("#")) console.log(`  ${line.replace(/^dimensio_/, "")}`);
    child.child.kill("SIGUSR2");
    // The snapshot is written after a full collection: what is live, not what awaits collection.
    const deadline = Date.now() + 120_000;
    let summary: string | null = null;
    while (summary === null && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 1000));
      const file = readdirSync(dir).find((f) => f.endsWith(".heapsnapshot"));
      if (!file) continue;
      try {
        summary = summariseSnapshot(path.join(dir, file));
      } catch {
        // still being written
      }
    }
    console.log(summary ?? "no heap snapshot within 2 minutes");
  } finally {
    child?.child.kill("SIGTERM");
    await child?.exited;
    rmSync(dir, { recursive: true, force: true });
    await services.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
