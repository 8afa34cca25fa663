// The bench's service on its own, for tools that look at a process from outside (strace -c,
// /proc/<pid>/stat, perf, --cpu-prof): loads the sample fixture and BENCH_CUSTOMERS customers on
// PostgreSQL, listens on a free port, logs in as anna, and writes { base, token, pid } to
// BENCH_SERVE_FILE (default /tmp/dimensio-bench-serve.json). SIGTERM ends it (and writes the CPU
// profile of a --cpu-prof run). Drive it with any load generator, e.g. autocannon:
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/serve.ts
//   npx autocannon -c 16 -d 5 -H "authorization: Bearer $TOKEN" "$BASE/api/v4/core/CUST/500?source=anag-1"
import { writeFileSync } from "node:fs";
import { listenAndLogin } from "../test/helpers/auth.ts";
import { openBenchApp } from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 2000);
const FILE = process.env.BENCH_SERVE_FILE ?? "/tmp/dimensio-bench-serve.json";

async function main() {
  const bench = await openBenchApp({ customers: CUSTOMERS, orders: 0, env: { LOG_LEVEL: "warn" } });
  const { base, token } = await listenAndLogin(bench.app, "anna", "anna-secret-1");
  process.on("SIGTERM", () => {
    bench.close().finally(() => process.exit(0));
  });
  writeFileSync(FILE, JSON.stringify({ base, token, pid: process.pid }));
  console.log(`serving on ${base} (pid ${process.pid}); ${FILE} holds the token`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
