// Process CPU per REST request (issue 19): the request path without sockets or a load generator.
// Loads the sample fixture, BENCH_CUSTOMERS customers and BENCH_ORDERS orders on PostgreSQL, then
// sends BENCH_REQUESTS requests of each workload through app.inject, BENCH_CONCURRENCY at a time,
// and prints the process's CPU time (user + system) per request: on a shared machine this moves far
// less than req/s (the least of BENCH_ROUNDS rounds is printed last), and first the async
// resources (promises, ...) each request makes, which are counted, not timed. Run under
// `node --min-semi-space-size=16 --max-semi-space-size=16 --import tsx` the scavenges per 1,000
// requests tell the bytes a request allocates (16 MB of young generation per scavenge, roughly). W2 is one customer by id, W3 the 20 newest orders with their customer.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/rest-cpu.ts
import { createHook } from "node:async_hooks";
import { constants, PerformanceObserver } from "node:perf_hooks";
import { bearer, loginAs } from "../test/helpers/auth.ts";
import { injectConcurrently, printCpuPerRequest } from "./cpu-measure.ts";
import { openBenchApp } from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 20_000);
const ORDERS = Number(process.env.BENCH_ORDERS ?? 20_000);
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 4000);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

async function main() {
  const bench = await openBenchApp({ customers: CUSTOMERS, orders: ORDERS, env: { LOG_LEVEL: "warn" } });
  const { app } = bench;
  try {
    const headers = bearer(await loginAs(app, "anna", "anna-secret-1"));
    const workloads: Array<[string, string]> = [
      ["W2", "/api/v4/core/CUST/5000?source=anag-1"],
      ["W3", "/api/v4/core/ORD?source=sales-1&sort=-ORD_ID&$num_rows=20&$expand=CUST&$count=none"],
    ];
    const inject = injectConcurrently(app, CONCURRENCY);
    const run = (url: string, n: number) => inject({ method: "GET", url, headers }, n);
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
    await printCpuPerRequest(
      workloads.map(([name, url]) => ({ name, requests: REQUESTS, send: (n) => run(url, n) })),
      ROUNDS,
      (requests) => {
        const scavengesBefore = scavenges;
        return async () => {
          // The observer is told of the last collections on a later turn.
          await new Promise((resolve) => setImmediate(resolve));
          return `${(((scavenges - scavengesBefore) * 1000) / requests).toFixed(1)} scavenges/1000 req`;
        };
      },
    );
    gc.disconnect();
  } finally {
    await bench.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
