// The event side's process CPU per event by batch size (issue 19, W4): BENCH_EVENTS outbox rows
// (a customer's Created event each) are written straight into the outbox, then published by a
// relay draining them BENCH_BATCHES at a time (EVENTS_BATCH_SIZE); with BENCH_MODE=all the
// subscribers of ROLE=all (webhooks, analytics, search, notifications, media clean-up) take them
// from the in-process bus too, and a measurement lasts until analytics has marked every event.
// Prints the process's CPU time (user + system) per event and the wall time per event, for each
// batch size, BENCH_ROUNDS times. The drain runs one batch after another: a batch's cost is that
// of its round trips and statements, whatever the rate of writes behind it.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/event-batches.ts
//   BENCH_MODE=all BENCH_BATCHES=25,100 npx tsx bench/event-batches.ts
import { createRelay } from "../src/events/relay.ts";
import { startEventRuntime } from "../src/events/runtime.ts";
import { createLogger } from "../src/logger.ts";
import { createTestServices } from "../test/helpers/env.ts";
import { requireBenchDatabase } from "./seed.ts";

const EVENTS = Number(process.env.BENCH_EVENTS ?? 20_000);
const BATCHES = (process.env.BENCH_BATCHES ?? "25,50,100,400").split(",").map(Number);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const MODE = process.env.BENCH_MODE === "all" ? "all" : "relay";

const PAYLOAD = JSON.stringify({
  CUST_ID: 123456,
  CODE: "B-00001",
  NAME: "Bench create",
  CITY_ID: null,
  EMAIL: null,
  CREDIT_LIMIT: null,
  VIP: null,
  SALES_REP: null,
  TREC: "N",
  CDATA: "2026-11-27T06:00:00.000Z",
  OWNER: "anna",
  LDATA: "2026-11-27T06:00:00.000Z",
  LOWNER: "anna",
});

async function main() {
  requireBenchDatabase();
  const services = await createTestServices("postgres", { fixture: "sample" });
  const { db } = services;
  const logger = createLogger("silent");
  const analyticsMarks = async () => {
    const { rows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_EVENT_CONSUMED" WHERE "SUBSCRIBER" = 'analytics'`,
    );
    return rows[0]!.n;
  };
  try {
    for (const batchSize of BATCHES) {
      for (let round = 1; round <= ROUNDS; round++) {
        await db.query(
          `INSERT INTO "TB_ANAG_OUTBOX00" ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID")
           SELECT 'CUSTCreated', 'CUST', g::text, $1::jsonb, 'anag-1' FROM generate_series(1, $2) g`,
          [PAYLOAD, EVENTS],
        );
        await db.query(`VACUUM ANALYZE "TB_ANAG_OUTBOX00"`);
        const marked = await analyticsMarks();
        const runtime =
          MODE === "all" ? await startEventRuntime(services, { subscribers: true, webhooks: true }) : null;
        const relay = createRelay({
          db,
          bus: services.bus,
          logger,
          batchSize,
          pollMs: 3_600_000,
          retentionMs: 0,
        });
        const cpu = process.cpuUsage();
        const started = performance.now();
        const published = await relay.drain();
        // With the subscribers: until analytics has counted every event (it marks each one).
        while (runtime && (await analyticsMarks()) < marked + published)
          await new Promise((resolve) => setTimeout(resolve, 5));
        const used = process.cpuUsage(cpu);
        const wall = performance.now() - started;
        await runtime?.stop();
        console.log(
          `${MODE}, batches of ${batchSize}, round ${round}: ${published} events, ` +
            `${((used.user + used.system) / published).toFixed(1)} µs CPU per event ` +
            `(system ${(used.system / published).toFixed(1)}), ${((wall * 1000) / published).toFixed(1)} µs wall`,
        );
      }
    }
  } finally {
    await services.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
