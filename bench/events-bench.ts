// The event side (issue 10) against a floor in the same run:
//
// 1. Commit-to-consumer latency at a steady write rate. Dimensio: an HTTP create every
//    1000/RATE ms; the time from its response (the transaction committed before it) to the message
//    reaching a consumer on the exchange. Floor: a bare `pg` INSERT + COMMIT into a scratch table,
//    then a confirmed publish with amqplib, to the same kind of consumer.
// 2. Webhook deliveries per second: BENCH_DELIVERIES events to one registration whose receiver is a
//    loopback HTTP server (events written in batches of 500, relayed, dispatched, delivered, logged).
//    Floor: the same number of POSTs straight from node:http, WEBHOOK_CONCURRENCY_PER_RECEIVER at
//    a time (the most Dimensio sends one receiver at once).
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//   TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:5672 npx tsx bench/events-bench.ts
//
// BENCH_RATE (writes/s, default 50), BENCH_SECONDS (default 10), BENCH_DELIVERIES (default 2000).
import { randomBytes } from "node:crypto";
import http from "node:http";
import amqplib from "amqplib";
import pg from "pg";
import { buildApp } from "../src/app.ts";
import { startEventRuntime } from "../src/events/runtime.ts";
import { listenAndLogin, UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { createTestServices, TEST_AMQP_URL, TEST_DATABASE_URL } from "../test/helpers/env.ts";
import { brokerConsumer, webhookReceiver } from "../test/events/support.ts";

const RATE = Number(process.env.BENCH_RATE ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const DELIVERIES = Number(process.env.BENCH_DELIVERIES ?? 2000);

const percentile = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};
const ms = (n: number) => n.toFixed(1);

async function steady(n: number, everyMs: number, fn: (i: number) => Promise<void>) {
  const started = performance.now();
  const running: Promise<void>[] = [];
  for (let i = 0; i < n; i++) {
    const due = started + i * everyMs;
    const wait = due - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    running.push(fn(i));
  }
  await Promise.all(running);
}

async function main() {
  if (!TEST_DATABASE_URL || !TEST_AMQP_URL) {
    console.error("Set TEST_DATABASE_URL and TEST_AMQP_URL (scratch databases and exchanges are created).");
    process.exit(2);
  }
  const exchange = `dimensio.bench.${randomBytes(4).toString("hex")}`;
  const services = await createTestServices("postgres", {
    fixture: "sample",
    env: {
      ...UNLIMITED_ENV,
      AMQP_URL: TEST_AMQP_URL,
      EVENTS_EXCHANGE: exchange,
      WEBHOOK_ALLOW_PRIVATE: "true",
    },
  });
  const app = await buildApp(services);
  const runtime = await startEventRuntime(services, { relay: true, webhooks: true });
  const consumer = await brokerConsumer(TEST_AMQP_URL, exchange);
  const writes = RATE * SECONDS;
  try {
    const { base, token } = await listenAndLogin(app, "anna", "anna-secret-1");
    const headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };

    // 1a. Dimensio: create at a steady rate; response → consumer.
    const committedAt = new Map<string, number>();
    const latencies: number[] = [];
    await steady(writes, 1000 / RATE, async (i) => {
      const res = await fetch(`${base}/api/v4/core/CITY?source=anag-3`, {
        method: "POST",
        headers,
        body: JSON.stringify({ data: { CITY_ID: `L${i}`, NAME: `Latency ${i}`, COUNTRY: "IT" } }),
      });
      const body = (await res.json()) as { event_id: string };
      committedAt.set(body.event_id, performance.now());
    });
    await consumer.waitFor((m) => m.length >= writes, 60_000);
    const arrivals = new Map(consumer.messages.map((m) => [String(m.body.OUTBOX_ID), m.at]));
    for (const [id, t] of committedAt) {
      const arrived = arrivals.get(id);
      // The message can arrive before the HTTP response does: then the latency is below 0.1 ms.
      if (arrived !== undefined) latencies.push(Math.max(0, arrived - t));
    }

    // 1b. Floor: bare pg INSERT + COMMIT, then a confirmed publish, to a consumer.
    const client = new pg.Client({
      connectionString: services.db.kind === "postgres" ? services.db.connectionString : "",
    });
    await client.connect();
    await client.query(`CREATE TABLE bench_outbox (id bigserial PRIMARY KEY, payload jsonb NOT NULL)`);
    const conn = await amqplib.connect(TEST_AMQP_URL);
    const ch = await conn.createConfirmChannel();
    const floorExchange = `${exchange}.floor`;
    await ch.assertExchange(floorExchange, "fanout", { durable: true });
    // The same broker work as Dimensio's: a durable subscriber queue bound (persistent messages
    // are confirmed once written there).
    await ch.assertQueue(`${floorExchange}.durable`, { durable: true });
    await ch.bindQueue(`${floorExchange}.durable`, floorExchange, "");
    const floorCommitted = new Map<string, number>();
    let chain = Promise.resolve();
    const floorLatencies: number[] = [];
    const floorArrivals = new Map<string, number>();
    const timed = await conn.createChannel();
    const q = await timed.assertQueue("", { exclusive: true });
    await timed.bindQueue(q.queue, floorExchange, "");
    await timed.consume(
      q.queue,
      (m) => {
        if (m) floorArrivals.set(String(m.properties.messageId), performance.now());
      },
      { noAck: true },
    );
    await steady(writes, 1000 / RATE, (i) => {
      chain = chain.then(async () => {
        await client.query("BEGIN");
        const { rows } = await client.query<{ id: string }>(
          `INSERT INTO bench_outbox (payload) VALUES ($1) RETURNING id::text AS id`,
          [JSON.stringify({ CITY_ID: `G${i}` })],
        );
        await client.query("COMMIT");
        const id = rows[0]!.id;
        floorCommitted.set(id, performance.now());
        ch.publish(floorExchange, "", Buffer.from(JSON.stringify({ OUTBOX_ID: id })), {
          persistent: true,
          messageId: id,
        });
        await ch.waitForConfirms();
      });
      return chain;
    });
    const deadline = Date.now() + 30_000;
    while (floorArrivals.size < writes && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    for (const [id, t] of floorCommitted) {
      const a = floorArrivals.get(id);
      if (a !== undefined) floorLatencies.push(Math.max(0, a - t));
    }
    await timed.close();
    await ch.deleteQueue(`${floorExchange}.durable`);
    await ch.close();
    await conn.close();
    await client.end();

    // 2a. Webhook deliveries per second through Dimensio.
    const receiver = await webhookReceiver();
    const reg = await fetch(`${base}/api/v4/webhooks`, {
      method: "POST",
      headers,
      body: JSON.stringify({ url: receiver.url, events: ["CITYCreated"] }),
    });
    if (reg.status !== 201) throw new Error(`registration answered ${reg.status}`);
    const batch = 500;
    const before = receiver.requests.length;
    const t0 = performance.now();
    for (let i = 0; i < DELIVERIES; i += batch) {
      await fetch(`${base}/api/v4/core/CITY/batch?source=anag-3`, {
        method: "POST",
        headers,
        body: JSON.stringify({
          data: Array.from({ length: Math.min(batch, DELIVERIES - i) }, (_, k) => ({
            CITY_ID: `H${i + k}`,
            NAME: `Hook ${i + k}`,
            COUNTRY: "IT",
          })),
        }),
      });
    }
    await receiver.waitFor(before + DELIVERIES, 120_000);
    const hookSeconds = (performance.now() - t0) / 1000;

    // 2b. Floor: the same POSTs from node:http, as many at a time as Dimensio allows one receiver.
    const body = receiver.requests[0]!.raw;
    const f0 = performance.now();
    let next = 0;
    const agent = new http.Agent({ keepAlive: false });
    const worker = async () => {
      while (next < DELIVERIES) {
        next++;
        await new Promise<void>((resolve, reject) => {
          const req = http.request(
            receiver.url,
            { method: "POST", agent, headers: { "content-type": "application/json" } },
            (res) => {
              res.resume();
              res.on("end", resolve);
            },
          );
          req.on("error", reject);
          req.end(body);
        });
      }
    };
    await Promise.all(Array.from({ length: services.config.webhookConcurrencyPerReceiver }, worker));
    const floorSeconds = (performance.now() - f0) / 1000;
    await receiver.close();

    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    const fp50 = percentile(floorLatencies, 50);
    const fp99 = percentile(floorLatencies, 99);
    console.log(`\n${writes} writes at ${RATE}/s; ${DELIVERIES} webhook deliveries\n`);
    console.log("| measure | floor | Dimensio | Dimensio / floor |");
    console.log("|---|---:|---:|---:|");
    console.log(`| commit → consumer p50 (ms) | ${ms(fp50)} | ${ms(p50)} | ${(p50 / fp50).toFixed(2)} × |`);
    console.log(`| commit → consumer p99 (ms) | ${ms(fp99)} | ${ms(p99)} | ${(p99 / fp99).toFixed(2)} × |`);
    const dps = DELIVERIES / hookSeconds;
    const fps = DELIVERIES / floorSeconds;
    console.log(
      `| webhook deliveries / s | ${fps.toFixed(0)} | ${dps.toFixed(0)} | ${(dps / fps).toFixed(2)} |`,
    );
    console.log(`\n(${latencies.length} latencies measured; messages seen ${consumer.messages.length})`);
  } finally {
    await consumer.close();
    await runtime.stop();
    await app.close();
    await services.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
