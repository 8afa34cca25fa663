// Where a request's time goes in the process (issue 11): loads the sample fixture plus
// BENCH_CUSTOMERS customers on PostgreSQL, then drives GET by id and a filtered list with
// autocannon while the process records a CPU profile. Run with --cpu-prof and summarise:
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//     node --cpu-prof --cpu-prof-dir=/tmp/prof --import tsx bench/profile.ts
//   node bench/summarise-profile.mjs /tmp/prof/*.cpuprofile
//
// BENCH_WORKLOAD=create profiles creates instead (bench/compare's W4), BENCH_WORKLOAD=expand the
// latest orders with their customer (W3, BENCH_ORDERS orders seeded first), BENCH_WORKLOAD=byid
// only GET by id (W2), BENCH_WORKLOAD=list only the filtered list (W1).
import { listenAndLogin } from "../test/helpers/auth.ts";
import { autocannon } from "./autocannon.ts";
import { BENCH_CREATE, BENCH_PATHS, openBenchApp } from "./seed.ts";

const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 20_000);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 8);
const ORDERS = Number(process.env.BENCH_ORDERS ?? 20_000);

async function main() {
  const bench = await openBenchApp({
    customers: CUSTOMERS,
    orders: process.env.BENCH_WORKLOAD === "expand" ? ORDERS : 0,
    env: { LOG_LEVEL: "warn" },
  });
  try {
    const { base, token } = await listenAndLogin(bench.app, "anna", "anna-secret-1");
    const headers = { authorization: `Bearer ${token}` };
    if (process.env.BENCH_WORKLOAD === "expand") {
      // BENCH_WORKLOAD=expand: the latest orders with their customer (W3 of bench/compare).
      const expand = await autocannon({
        url: `${base}${BENCH_PATHS.orders}`,
        connections: 16,
        duration: SECONDS,
        headers,
      });
      console.log(`expand ${expand.requests.average.toFixed(0)} req/s (${expand.requests.total} requests)`);
      return;
    }
    if (process.env.BENCH_WORKLOAD === "create") {
      // BENCH_WORKLOAD=create: only creates (W4 of bench/compare).
      const creates = await autocannon({
        url: `${base}${BENCH_PATHS.create}`,
        method: "POST",
        body: JSON.stringify({ data: BENCH_CREATE }),
        connections: 16,
        duration: SECONDS,
        headers: { ...headers, "content-type": "application/json" },
      });
      console.log(`create ${creates.requests.average.toFixed(0)} req/s`);
      return;
    }
    if (process.env.BENCH_WORKLOAD !== "list") {
      const byId = await autocannon({
        url: `${base}${BENCH_PATHS.byId(5000)}`,
        connections: 16,
        duration: SECONDS,
        headers,
      });
      console.log(`GET by id ${byId.requests.average.toFixed(0)} req/s (${byId.requests.total} requests)`);
    }
    if (process.env.BENCH_WORKLOAD === "byid") return;
    const list = await autocannon({
      url: `${base}${BENCH_PATHS.list}`,
      connections: 16,
      duration: SECONDS,
      headers,
    });
    console.log(`list ${list.requests.average.toFixed(0)} req/s (${list.requests.total} requests)`);
  } finally {
    await bench.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
