// Process CPU per REST request (issue 19): the request path without sockets or a load generator.
// Loads the sample fixture, BENCH_CUSTOMERS customers and BENCH_ORDERS orders on PostgreSQL, then
// sends BENCH_REQUESTS requests of each workload through app.inject, BENCH_CONCURRENCY at a time,
// and prints the process's CPU time (user + system) per request: on a shared machine this moves far
// less than req/s (the least of BENCH_ROUNDS rounds is printed last), and first the async
// resources (promises, ...) each request makes, which are counted, not timed. Run under
// `node --min-semi-space-size=16 --max-semi-space-size=16 --import tsx` the scavenges per 1,000
// requests tell the bytes a request allocates (16 MB of young generation per scavenge, roughly). W1 is 20
// customers of a city by name (with its total, kept by the totals cache after the first), W2 one customer by id, W3 the 20 newest orders with their customer,
// W4 bench/compare's create of a customer (its code given) and gW4 the same as a GraphQL mutation;
// beside the process's CPU, that of the PostgreSQL backends of the bench's database (read from
// /proc: PostgreSQL on this machine), so that other databases' work on a shared host is not in it.
// BENCH_WORKLOADS=W4,gW4 runs only those.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/rest-cpu.ts
import { createHook } from "node:async_hooks";
import { readFileSync } from "node:fs";
import { constants, PerformanceObserver } from "node:perf_hooks";
import { bearer, loginAs } from "../test/helpers/auth.ts";
import { cpuBenchSettings, injectConcurrently, printCpuPerRequest } from "./cpu-measure.ts";
import {
  BENCH_CREATE,
  BENCH_CREATE_MUTATION,
  BENCH_PATHS,
  forgetBenchCreates,
  openBenchApp,
} from "./seed.ts";

const settings = cpuBenchSettings();

/** CPU time (user + system) of the processes `pids` so far, in µs (clock ticks of 10 ms). */
function cpuOfPids(pids: readonly number[]): number {
  let ticks = 0;
  for (const pid of pids) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      ticks += Number(fields[11]) + Number(fields[12]);
    } catch {
      // gone
    }
  }
  return ticks * 10_000;
}

async function main() {
  const bench = await openBenchApp({
    customers: settings.customers,
    orders: settings.orders,
    env: { LOG_LEVEL: "warn" },
  });
  const { app, services } = bench;
  try {
    const headers = bearer(await loginAs(app, "anna", "anna-secret-1"));
    type Request = { url: string; method?: "GET" | "POST"; payload?: unknown; status?: number };
    const all: Array<[string, Request]> = [
      ["W1", { url: BENCH_PATHS.list }],
      ["W2", { url: BENCH_PATHS.byId(5000) }],
      ["W3", { url: BENCH_PATHS.orders }],
      [
        "W4",
        {
          url: BENCH_PATHS.create,
          method: "POST",
          payload: { data: BENCH_CREATE },
          status: 201,
        },
      ],
      [
        "gW4",
        {
          url: "/graphql",
          method: "POST",
          payload: {
            query: BENCH_CREATE_MUTATION,
          },
        },
      ],
    ];
    const workloads = all.filter(([name]) => !settings.only || settings.only.includes(name));
    const inject = injectConcurrently(
      app,
      settings.concurrency,
      (res) => res.statusCode < 300 && !res.body.includes('"errors"'),
    );
    const run = (r: Request, n: number) =>
      inject(
        {
          method: r.method ?? "GET",
          url: r.url,
          headers,
          ...(r.payload ? { payload: r.payload as Record<string, unknown> } : {}),
        },
        n,
      );
    /** The PostgreSQL backends of the bench's database (its pool's connections, once warm). */
    const backends = async () =>
      (
        await services.db.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()`,
        )
      ).rows.map((r) => r.pid);
    for (const [, url] of workloads) await run(url, 500); // warm-up: compiled serializers, JIT
    // Async resources (promises, mostly) made per request: counted, so exact on a busy machine.
    for (const [name, url] of workloads) {
      const made = new Map<string, number>();
      const hook = createHook({
        init(_id, type) {
          made.set(type, (made.get(type) ?? 0) + 1);
        },
      }).enable();
      await run(url, 200);
      hook.disable();
      const per = [...made].map(([type, n]) => `${type} ${(n / 200).toFixed(1)}`).join(", ");
      console.log(`${name} async resources per request: ${per}`);
    }
    // The creates' customers go after each create workload (POST), so that the lists measure the seed.
    const forget = () => forgetBenchCreates(services.db);
    await forget();
    // Young-generation collections: with the semi-space fixed (--min-semi-space-size and
    // --max-semi-space-size equal), their number per request follows the bytes a request allocates.
    let scavenges = 0;
    const gc = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        if (
          (entry as PerformanceEntry & { detail?: { kind?: number } }).detail?.kind ===
          constants.NODE_PERFORMANCE_GC_MINOR
        )
          scavenges++;
      }
    });
    gc.observe({ entryTypes: ["gc"] });
    // Next to the process's CPU: the bench database's PostgreSQL backends' and the scavenges.
    const leastDb = new Map<string, number>();
    await printCpuPerRequest(
      workloads.map(([name, r]) => ({
        name,
        requests: settings.requests,
        send: (n) => run(r, n),
        ...(r.method === "POST" ? { after: forget } : {}),
      })),
      settings.rounds,
      async (name, requests) => {
        const pids = await backends();
        const dbBefore = cpuOfPids(pids);
        const scavengesBefore = scavenges;
        return async () => {
          const dbPerRequest = (cpuOfPids(pids) - dbBefore) / requests;
          leastDb.set(name, Math.min(leastDb.get(name) ?? Number.POSITIVE_INFINITY, dbPerRequest));
          // The observer is told of the last collections on a later turn.
          await new Promise((resolve) => setImmediate(resolve));
          const collections = ((scavenges - scavengesBefore) * 1000) / requests;
          return `PostgreSQL ${dbPerRequest.toFixed(0)} µs/req, ${collections.toFixed(1)} scavenges/1000 req`;
        };
      },
    );
    gc.disconnect();
    console.log(
      `least PostgreSQL: ${[...leastDb].map(([name, us]) => `${name} ${us.toFixed(0)} µs/req`).join("; ")}`,
    );
  } finally {
    await bench.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
