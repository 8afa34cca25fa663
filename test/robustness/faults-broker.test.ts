// Issue 18 §1, the broker cut while writes run: the service as a child process (ROLE=all: relay,
// subscribers, webhooks) reaches RabbitMQ through a TCP proxy the test cuts. Every write keeps
// answering 201/200 without a stall, the process stays up (an ack on the channel that died with
// the connection used to crash it), and once the proxy is restored every event reaches the broker,
// in order per record. On the embedded database (one connection: a relay transaction waiting on
// the gone broker would hold every write) and on PostgreSQL.
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import amqplib from "amqplib";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type BrokerMessage, brokerConsumer, eventually, tcpProxy } from "../events/support.ts";
import { SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { SAMPLE_FIXTURE, TEST_AMQP_URL, TEST_DATABASE_URL } from "../helpers/env.ts";
import { freePort, type Running, spawnScript, waitReady } from "../helpers/process.ts";
import { throughProxy } from "../helpers/proxy.ts";

interface Setup {
  name: string;
  /** The database settings of the child process, and how to look at its outbox once it stopped. */
  open(): Promise<{ env: Record<string, string>; cleanup(): Promise<void> }>;
}

const SETUPS: Setup[] = [
  {
    name: "embedded database",
    async open() {
      const dir = await mkdtemp(path.join(tmpdir(), "dimensio-faults-broker-"));
      return { env: { DATA_DIR: dir }, cleanup: () => rm(dir, { recursive: true, force: true }) };
    },
  },
];
if (TEST_DATABASE_URL)
  SETUPS.push({
    name: "PostgreSQL",
    async open() {
      const name = `dimensio_fb_${process.pid}_${randomBytes(4).toString("hex")}`;
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL! });
      await admin.connect();
      await admin.query(`CREATE DATABASE "${name}"`);
      await admin.end();
      const url = new URL(TEST_DATABASE_URL!);
      url.pathname = `/${name}`;
      return {
        env: { DATABASE_URL: url.toString() },
        async cleanup() {
          const a = new pg.Client({ connectionString: TEST_DATABASE_URL! });
          await a.connect();
          await a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
          await a.end();
        },
      };
    },
  });

async function json(res: Response) {
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/** The service as a child process (ROLE=all) whose broker connection goes through a proxy. */
async function startService(dbEnv: Record<string, string>, cleanups: (() => Promise<void>)[]) {
  const exchange = `dimensio.test.faults.${randomBytes(4).toString("hex")}`;
  // Last: the subscribers' durable queues and the exchange of this run go.
  cleanups.push(async () => {
    const conn = await amqplib.connect(TEST_AMQP_URL!);
    const ch = await conn.createChannel();
    for (const name of SUBSCRIBERS) {
      await ch.deleteQueue(`${exchange}.${name}`);
      await ch.deleteQueue(`${exchange}.${name}.dead`);
    }
    await ch.deleteExchange(exchange);
    await conn.close();
  });
  const consumer = await brokerConsumer(TEST_AMQP_URL!, exchange);
  cleanups.push(() => consumer.close());
  const broker = new URL(TEST_AMQP_URL!);
  const proxy = await tcpProxy(broker.hostname, Number(broker.port || 5672));
  cleanups.push(() => proxy.close());
  const viaProxy = throughProxy(TEST_AMQP_URL!, proxy);
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let running: Running | null = null;
  const start = async () => {
    running = spawnScript("src/main.ts", [], {
      ...dbEnv,
      ...UNLIMITED_ENV,
      PORT: String(port),
      DEMO_DATA: "false",
      AMQP_URL: viaProxy,
      EVENTS_EXCHANGE: exchange,
      JWT_SECRET: "faults-broker-secret-faults-broker-secret-0123",
    });
    const r = running;
    cleanups.push(async () => {
      if (r.child.exitCode === null) {
        r.child.kill("SIGTERM");
        await r.exited;
      }
    });
    await waitReady(base, r);
    const login = await json(
      await fetch(`${base}/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(SAMPLE_USERS.anna),
      }),
    );
    expect(login.status).toBe(200);
    const token = (login.body.data as { access_token: string }).access_token;
    const send = async (method: "POST" | "PATCH" | "GET", url: string, data?: unknown) => {
      const started = performance.now();
      const res = await json(
        await fetch(`${base}${url}`, {
          method,
          headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
          ...(data === undefined ? {} : { body: JSON.stringify({ data }) }),
        }),
      );
      return { ...res, ms: performance.now() - started };
    };
    return { running: r, send };
  };
  return { consumer, proxy, base, start, exchange };
}

/** The durable subscribers of ROLE=all (src/events/runtime.ts). */
const SUBSCRIBERS = ["webhooks", "analytics", "search", "media-gc", "notifications"];

const ofRecords = (prefix: string) => (ms: BrokerMessage[]) =>
  ms.filter((m) => m.body.AGGREGATE_TYPE === "CITY" && String(m.body.AGGREGATE_ID).startsWith(prefix));

/** Each record's events, first deliveries only, are in OUTBOX_ID order; `count` per record. */
function expectInOrderPerRecord(mine: BrokerMessage[], ids: string[], count: number) {
  for (const id of ids) {
    const seen = new Set<string>();
    const firsts: bigint[] = [];
    for (const m of mine.filter((x) => x.body.AGGREGATE_ID === id)) {
      const outboxId = String(m.body.OUTBOX_ID);
      if (seen.has(outboxId)) continue;
      seen.add(outboxId);
      firsts.push(BigInt(outboxId));
    }
    expect(firsts).toHaveLength(count);
    expect([...firsts].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))).toEqual(firsts);
  }
}

// Defined only where a broker runs (no skipped tests).
if (TEST_AMQP_URL)
  describe.each(SETUPS)("the broker away ($name)", (setup) => {
    const cleanups: (() => Promise<void>)[] = [];
    let dbEnv: Record<string, string>;
    beforeAll(async () => {
      const db = await setup.open();
      cleanups.push(db.cleanup);
      dbEnv = db.env;
      const imported = spawnScript("src/cli/import.ts", [SAMPLE_FIXTURE], db.env);
      expect(await imported.exited, imported.output()).toBe(0);
    }, 60_000);
    afterAll(async () => {
      for (const c of cleanups.reverse()) await c().catch(() => {});
    });

    it("cut while writes run: writes answer 2xx throughout, the process stays up, and every event is published in order per record once the broker is back", async () => {
      const { consumer, proxy, base, start } = await startService(dbEnv, cleanups);
      const { running, send } = await start();

      // Records written in a loop: created, then updated round after round; the proxy is cut while
      // the subscribers are busy with the first rounds, and restored a few seconds later.
      const prefix = `F${randomBytes(2).toString("hex").toUpperCase()}`;
      const ids = Array.from({ length: 10 }, (_, i) => `${prefix}${i}`);
      const eventIds: string[] = [];
      const slowest: number[] = [];
      const statuses: number[] = [];
      const created = await send(
        "POST",
        "/api/v4/core/CITY/batch?source=anag-3",
        ids.map((id) => ({ CITY_ID: id, NAME: id, COUNTRY: "IT" })),
      );
      expect(created.status, JSON.stringify(created.body)).toBe(200);
      expect(created.body.success).toBe(ids.length);
      for (const r of created.body.results as { event_id: string }[]) eventIds.push(r.event_id);
      let round = 0;
      const writeRound = async () => {
        round++;
        for (const id of ids) {
          const res = await send("PATCH", `/api/v4/core/CITY/${id}?source=anag-3`, {
            NAME: `${id} v${round}`,
          });
          statuses.push(res.status);
          slowest.push(res.ms);
          if (res.status === 200) eventIds.push(String(res.body.event_id));
        }
      };
      for (let i = 0; i < 3; i++) await writeRound();
      proxy.cut();
      const cutAt = Date.now();
      // Writes go on while the broker is away: at least 3 s and 10 rounds.
      while (Date.now() - cutAt < 3000 || round < 13) await writeRound();
      expect(running.child.exitCode).toBeNull();
      proxy.restore();
      for (let i = 0; i < 3; i++) await writeRound();

      expect(statuses.filter((s) => s !== 200)).toEqual([]);
      // No write waited on the broker (a relay transaction held through the outage would show).
      // (The relay's publish timeout is 10 s: a write held behind it would take longer than this.)
      expect(Math.max(...slowest)).toBeLessThan(5000);

      const totalEvents = ids.length * (round + 1);
      const ofMine = ofRecords(prefix);
      await consumer.waitFor(
        (ms) => new Set(ofMine(ms).map((m) => m.body.OUTBOX_ID)).size >= totalEvents,
        60_000,
      );
      const mine = ofMine(consumer.messages);
      const published = new Set(mine.map((m) => String(m.body.OUTBOX_ID)));
      expect(published.size).toBe(totalEvents);
      for (const id of eventIds) expect(published.has(id), id).toBe(true);
      // In order per record: the first delivery of each event comes in OUTBOX_ID order, and the
      // last state is the last round's (a redelivery after the cut may repeat an event, never
      // put an older one after a newer).
      expectInOrderPerRecord(mine, ids, round + 1);
      for (const id of ids) {
        const last = mine.filter((x) => x.body.AGGREGATE_ID === id).at(-1)!;
        expect((last.body.PAYLOAD as Record<string, unknown>).NAME).toBe(`${id} v${round}`);
      }

      // The process is still up, and reads of what it wrote still answer.
      expect(running.child.exitCode).toBeNull();
      expect((await send("GET", `/api/v4/core/CITY/${ids[0]}?source=anag-3`)).status).toBe(200);
      await eventually(
        async () => {
          const metrics = await (await fetch(`${base}/metrics`)).text();
          return /^dimensio_outbox_backlog\{[^}]*\} 0$/m.test(metrics);
        },
        { what: "an empty outbox backlog", timeoutMs: 30_000 },
      );
      expect(running.output()).not.toMatch(/Unhandled|IllegalOperationError/i);
      running.child.kill("SIGTERM");
      expect(await running.exited).toBe(0);
    }, 180_000);

    it("started while the broker is unreachable: ready, writes answer, and every event is published once it is reachable", async () => {
      const { consumer, proxy, base, start, exchange } = await startService(dbEnv, cleanups);
      proxy.cut();
      const { running, send } = await start();

      const prefix = `S${randomBytes(2).toString("hex").toUpperCase()}`;
      const ids = Array.from({ length: 5 }, (_, i) => `${prefix}${i}`);
      const created = await send(
        "POST",
        "/api/v4/core/CITY/batch?source=anag-3",
        ids.map((id) => ({ CITY_ID: id, NAME: id, COUNTRY: "IT" })),
      );
      expect(created.body.success).toBe(ids.length);
      for (let round = 1; round <= 2; round++)
        for (const id of ids) {
          const res = await send("PATCH", `/api/v4/core/CITY/${id}?source=anag-3`, {
            NAME: `${id} v${round}`,
          });
          expect(res.status).toBe(200);
          expect(res.ms).toBeLessThan(5000);
        }
      const metrics = await (await fetch(`${base}/metrics`)).text();
      expect(Number(/^dimensio_outbox_backlog\{[^}]*\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(
        15,
      );
      expect(ofRecords(prefix)(consumer.messages)).toEqual([]);

      proxy.restore();
      await consumer.waitFor(
        (ms) => new Set(ofRecords(prefix)(ms).map((m) => m.body.OUTBOX_ID)).size >= 15,
        60_000,
      );
      expectInOrderPerRecord(ofRecords(prefix)(consumer.messages), ids, 3);
      // The relay published only once the subscribers' queues were set up (they exist now).
      const conn = await amqplib.connect(TEST_AMQP_URL!);
      try {
        const ch = await conn.createChannel();
        for (const name of SUBSCRIBERS) await ch.checkQueue(`${exchange}.${name}`);
      } finally {
        await conn.close();
      }
      expect(running.child.exitCode).toBeNull();
      running.child.kill("SIGTERM");
      expect(await running.exited).toBe(0);
    }, 180_000);
  });

// Wherever the suite runs (with or without a broker of its own): a broker address nothing answers
// at start-up. The process becomes ready, writes answer at once, the outbox keeps their events.
describe("a broker address nothing answers (embedded database)", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterAll(async () => {
    for (const c of cleanups.reverse()) await c().catch(() => {});
  });

  it("starts ready, answers writes without waiting on the broker, keeps their events in the outbox and stops cleanly", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "dimensio-faults-nobroker-"));
    cleanups.push(() => rm(dir, { recursive: true, force: true }));
    const imported = spawnScript("src/cli/import.ts", [SAMPLE_FIXTURE], { DATA_DIR: dir });
    expect(await imported.exited, imported.output()).toBe(0);
    const nobody = await freePort();
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    const running = spawnScript("src/main.ts", [], {
      DATA_DIR: dir,
      ...UNLIMITED_ENV,
      PORT: String(port),
      DEMO_DATA: "false",
      AMQP_URL: `amqp://guest:guest@127.0.0.1:${nobody}`,
      JWT_SECRET: "faults-broker-secret-faults-broker-secret-0123",
    });
    cleanups.push(async () => {
      if (running.child.exitCode === null) {
        running.child.kill("SIGKILL");
        await running.exited;
      }
    });
    await waitReady(base, running);
    const login = await fetch(`${base}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(SAMPLE_USERS.anna),
    });
    expect(login.status).toBe(200);
    const token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
    for (let i = 0; i < 3; i++) {
      const started = performance.now();
      const res = await fetch(`${base}/api/v4/core/CITY?source=anag-3`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ data: { CITY_ID: `NB${i}`, NAME: `No broker ${i}`, COUNTRY: "IT" } }),
      });
      expect(res.status, await res.text()).toBe(201);
      expect(performance.now() - started).toBeLessThan(5000);
    }
    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(200);
    const metrics = await (await fetch(`${base}/metrics`)).text();
    expect(Number(/^dimensio_outbox_backlog\{[^}]*\} (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(3);
    expect(running.child.exitCode).toBeNull();
    running.child.kill("SIGTERM");
    expect(await running.exited).toBe(0);
  }, 120_000);
});
