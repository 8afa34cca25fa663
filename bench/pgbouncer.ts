// bench/pgbouncer (issue 36 §4): many service processes on few database connections. Six `npm
// start` processes (ROLE=all: each with its relay and subscribers) reach PostgreSQL through one
// PgBouncer in transaction pooling mode with 20 server connections (DATABASE_POOL_MODE=transaction,
// LISTEN on DATABASE_LISTEN_URL, direct), publish to one RabbitMQ exchange, and take W2 (a
// customer by id) and W4 (a create) together on every process for BENCH_SECONDS (60). Judged:
// no failed request, and on the broker every create's event exactly once (no event lost, none
// published twice), the outbox empty at the end.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//   TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:5672 npx tsx bench/pgbouncer.ts
//
// BENCH_PROCESSES (6), BENCH_SERVER_CONNECTIONS (20), BENCH_CONNECTIONS per process and workload
// (4), BENCH_SECONDS (60), BENCH_CUSTOMERS (20,000). Needs Debian's pgbouncer (apt-get install
// pgbouncer; test/helpers/pgbouncer.ts finds it).
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { loginOverHttp } from "../test/helpers/auth.ts";
import { TEST_AMQP_URL } from "../test/helpers/env.ts";
import { startPgBouncer } from "../test/helpers/pgbouncer.ts";
import { freePort, type Running, spawnStart, waitReady } from "../test/helpers/process.ts";
import { brokerConsumer } from "../test/events/support.ts";
import { autocannon } from "./autocannon.ts";
import { BENCH_CREATE, BENCH_PATHS, benchServiceEnv, openBenchServices, seedCustomers } from "./seed.ts";

const PROCESSES = Number(process.env.BENCH_PROCESSES ?? 6);
const SERVER_CONNECTIONS = Number(process.env.BENCH_SERVER_CONNECTIONS ?? 20);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 4);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 60);
const CUSTOMERS = Number(process.env.BENCH_CUSTOMERS ?? 20_000);

async function main() {
  if (!TEST_AMQP_URL) {
    console.error("Set TEST_AMQP_URL (a RabbitMQ the processes publish to), and TEST_DATABASE_URL.");
    process.exit(2);
  }
  const services = await openBenchServices();
  const direct = services.db.kind === "postgres" ? services.db.connectionString : "";
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "dimensio-bench-pgbouncer-"));
  const exchange = `dimensio.bench.${process.pid}`;
  const bouncer = await startPgBouncer(direct, { poolMode: "transaction", poolSize: SERVER_CONNECTIONS });
  const processes: Array<{ base: string; running: Running }> = [];
  const consumer = await brokerConsumer(TEST_AMQP_URL, exchange);
  try {
    await seedCustomers(services.db, CUSTOMERS);
    const {
      rows: [{ id } = { id: 0 }],
    } = await services.db.query<{ id: number }>(
      `SELECT "CUST_ID" AS id FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' ORDER BY "CUST_ID" OFFSET $1 LIMIT 1`,
      [Math.floor(CUSTOMERS / 2)],
    );
    for (let i = 0; i < PROCESSES; i++) {
      const port = await freePort();
      const running = spawnStart({
        ...benchServiceEnv(bouncer.urlFor(direct), port, path.join(dataDir, String(i))),
        DATABASE_POOL_MODE: "transaction",
        DATABASE_LISTEN_URL: direct,
        AMQP_URL: TEST_AMQP_URL,
        EVENTS_EXCHANGE: exchange,
      });
      processes.push({ base: `http://127.0.0.1:${port}`, running });
    }
    for (const p of processes) await waitReady(p.base, p.running);
    const token = await loginOverHttp(processes[0]!.base, "anna", "anna-secret-1");
    const auth = { authorization: `Bearer ${token}` };
    const started = Date.now();
    const results = await Promise.all(
      processes.flatMap((p) => [
        autocannon({
          url: `${p.base}${BENCH_PATHS.byId(id)}`,
          headers: auth,
          connections: CONNECTIONS,
          duration: SECONDS,
        }),
        autocannon({
          url: `${p.base}${BENCH_PATHS.create}`,
          method: "POST",
          headers: { ...auth, "content-type": "application/json" },
          body: JSON.stringify({ data: BENCH_CREATE }),
          connections: CONNECTIONS,
          duration: SECONDS,
        }),
      ]),
    );
    const elapsed = (Date.now() - started) / 1000;
    const reads = results.filter((_, i) => i % 2 === 0);
    const creates = results.filter((_, i) => i % 2 === 1);
    const sum = (rs: typeof results, f: (r: (typeof results)[number]) => number) =>
      rs.reduce((a, r) => a + f(r), 0);
    const { rows: created } = await services.db.query<{ id: string }>(
      `SELECT "CUST_ID"::text AS id FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "NAME" = $1`,
      [BENCH_CREATE.NAME],
    );
    const ids = new Set(created.map((r) => r.id));
    const isCreate = (m: { body: { AGGREGATE_TYPE?: string; EVENT_TYPE?: string; AGGREGATE_ID?: string } }) =>
      m.body.AGGREGATE_TYPE === "CUST" &&
      /Created$/.test(m.body.EVENT_TYPE ?? "") &&
      ids.has(String(m.body.AGGREGATE_ID));
    await consumer.waitFor((ms) => ms.filter(isCreate).length >= ids.size, 120_000).catch(() => {});
    const events = consumer.messages.filter(isCreate);
    const perRecord = new Map<string, number>();
    for (const m of events)
      perRecord.set(String(m.body.AGGREGATE_ID), (perRecord.get(String(m.body.AGGREGATE_ID)) ?? 0) + 1);
    const twice = [...perRecord.values()].filter((n) => n > 1).length;
    const missing = [...ids].filter((i) => !perRecord.has(i)).length;
    const { rows: outbox } = await services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`,
    );
    const { rows: backends } = await services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND application_name LIKE 'dimensio%'`,
    );

    console.log(
      `\nbench/pgbouncer: ${PROCESSES} processes (ROLE=all) through one PgBouncer (transaction pooling, ${SERVER_CONNECTIONS} server connections), W2 and W4 at ${CONNECTIONS} connections each per process for ${SECONDS} s; Node ${process.version}; load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}\n`,
    );
    console.log("| | W2 (by id) | W4 (create) |");
    console.log("|---|---:|---:|");
    console.log(
      `| requests | ${sum(reads, (r) => r.requests.total)} | ${sum(creates, (r) => r.requests.total)} |`,
    );
    console.log(
      `| req/s (all processes) | ${(sum(reads, (r) => r.requests.total) / elapsed).toFixed(0)} | ${(sum(creates, (r) => r.requests.total) / elapsed).toFixed(0)} |`,
    );
    console.log(
      `| p99 (worst process) | ${Math.max(...reads.map((r) => r.latency.p99))} ms | ${Math.max(...creates.map((r) => r.latency.p99))} ms |`,
    );
    console.log(
      `| errors, non-2xx | ${sum(reads, (r) => r.errors)}, ${sum(reads, (r) => r.non2xx)} | ${sum(creates, (r) => r.errors)}, ${sum(creates, (r) => r.non2xx)} |`,
    );
    console.log(
      `\nCreated rows ${ids.size}; their Created events on the broker ${events.length}: missing ${missing}, published more than once ${twice}; unpublished outbox rows at the end ${outbox[0]!.n}; connections named dimensio* to PostgreSQL at the end ${backends[0]!.n} (PgBouncer's server connections, at most ${SERVER_CONNECTIONS}, the processes' direct LISTEN connections, and the bench's own pool).`,
    );
    const failed = sum(results, (r) => r.errors + r.non2xx);
    if (failed || missing || twice || outbox[0]!.n) process.exitCode = 1;
  } finally {
    for (const p of processes) p.running.child.kill("SIGTERM");
    await Promise.all(processes.map((p) => p.running.exited));
    await consumer.close();
    await bouncer.stop();
    await services.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
