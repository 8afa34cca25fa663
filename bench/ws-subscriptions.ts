// bench/ws-subscriptions (issue 38 §5): what open GraphQL subscriptions over WebSocket cost. The
// service (`npm start`, a process of its own, on a scratch PostgreSQL database) takes
// BENCH_SUBSCRIBERS (1,000) live subscriptions of one user to CUST's events, BENCH_PER_SOCKET (1)
// on each socket;
// then one create is fanned out to all of them, BENCH_EVENTS (20) times. Printed: the service's RSS
// before the sockets, with them idle, and per subscription (target: the 1,000 under 50 MB in all);
// per event, the time from the create's answer until every subscriber has it, and the service's
// CPU per event and per subscriber.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/ws-subscriptions.ts
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { type Client, createClient } from "graphql-ws";
import WebSocket from "ws";
import { loginOverHttp } from "../test/helpers/auth.ts";
import { freePort, spawnStart, waitReady } from "../test/helpers/process.ts";
import { memoryMb, processCpuMs, processQuiet } from "./process-stats.ts";
import { BENCH_CREATE, BENCH_PATHS, benchServiceEnv, openBenchServices } from "./seed.ts";

const SUBSCRIBERS = Number(process.env.BENCH_SUBSCRIBERS ?? 1000);
const EVENTS = Number(process.env.BENCH_EVENTS ?? 20);
/** Subscriptions per socket (graphql-ws multiplexes): 1, every subscription its own socket. */
const PER_SOCKET = Math.max(1, Number(process.env.BENCH_PER_SOCKET ?? 1));

async function main() {
  const services = await openBenchServices();
  const dataDir = await mkdtemp(path.join(os.tmpdir(), "dimensio-bench-ws-"));
  const url = services.db.kind === "postgres" ? services.db.connectionString : "";
  const port = await freePort();
  const many = String(SUBSCRIBERS * 2);
  const running = spawnStart({
    ...benchServiceEnv(url, port, dataDir),
    SUBSCRIPTIONS_MAX_PER_USER: many,
    SUBSCRIPTIONS_MAX_PER_TENANT: many,
    SUBSCRIPTIONS_MAX_PER_PROCESS: many,
    WS_MAX_SOCKETS_PER_USER: many,
    WS_MAX_SOCKETS_PER_TENANT: many,
    WS_MAX_SOCKETS: many,
  });
  const base = `http://127.0.0.1:${port}`;
  const clients: Client[] = [];
  try {
    await waitReady(base, running);
    const pid = running.child.pid!;
    const token = await loginOverHttp(base, "anna", "anna-secret-1");
    const authorization = `Bearer ${token}`;
    const create = async () => {
      const res = await fetch(`${base}${BENCH_PATHS.create}`, {
        method: "POST",
        headers: { authorization, "content-type": "application/json" },
        body: JSON.stringify({ data: BENCH_CREATE }),
      });
      if (res.status !== 201) throw new Error(`create answered ${res.status}`);
      await res.arrayBuffer();
    };
    // Every subscriber's count of events, and who waits for each to pass a count of its own.
    const received = new Array<number>(SUBSCRIBERS).fill(0);
    let waiting: { past: number[]; resolve: () => void } | null = null;
    const allPast = (past: number[]) =>
      new Promise<void>((resolve) => {
        if (received.every((n, i) => n > past[i]!)) resolve();
        else waiting = { past, resolve };
      });
    const socket = () => {
      const client = createClient({
        url: `ws://127.0.0.1:${port}/graphql`,
        webSocketImpl: WebSocket,
        lazy: false,
        retryAttempts: 0,
        onNonLazyError: () => {},
        connectionParams: { authorization },
      });
      clients.push(client);
      return client;
    };
    let current: Client | null = null;
    const subscribe = (i: number, own = false) => {
      if (own || !current || i % PER_SOCKET === 0) current = socket();
      const client = current;
      client.subscribe(
        { query: `subscription { CUST_events(source: "anag-1") { event_id event_type record_id data } }` },
        {
          next: () => {
            received[i]! += 1;
            if (waiting && received.every((n, j) => n > waiting!.past[j]!)) {
              const w = waiting;
              waiting = null;
              w.resolve();
            }
          },
          error: (err) => console.error(`subscriber ${i}:`, err),
          complete: () => {},
        },
      );
    };

    // Warm: one subscriber and an event, so that what the first subscription loads is not counted.
    subscribe(0, true);
    for (let round = 1; ; round++) {
      await create();
      await new Promise((r) => setTimeout(r, 200));
      if (received[0]! > 0 || round > 50) break;
    }
    await clients.pop()?.dispose();
    current = null;
    received[0] = 0;
    await processQuiet(pid, 500);
    const rssBefore = memoryMb(pid, "VmRSS");

    for (let i = 0; i < SUBSCRIBERS; i++) subscribe(i);
    // Every subscription is live once each has had an event: creates until then.
    for (let round = 1; !received.every((n) => n > 0); round++) {
      if (round > 100) throw new Error(`only ${received.filter((n) => n > 0).length} subscribers live`);
      await create();
      await new Promise((r) => setTimeout(r, 500));
    }
    await processQuiet(pid, 500);
    const rssIdle = memoryMb(pid, "VmRSS");

    // Fan-out: one create at a time, until every subscriber has it.
    const times: number[] = [];
    const cpu0 = processCpuMs(pid);
    for (let e = 1; e <= EVENTS; e++) {
      const past = [...received];
      const t0 = performance.now();
      await create();
      await allPast(past);
      times.push(performance.now() - t0);
    }
    const cpu = (processCpuMs(pid) - cpu0) / EVENTS;
    const sorted = [...times].sort((a, b) => a - b);
    console.log(
      `\nbench/ws-subscriptions: ${SUBSCRIBERS} WebSocket subscriptions of one user (${PER_SOCKET} per socket: ${clients.length} sockets), ${EVENTS} events fanned out; Node ${process.version}; load average ${os
        .loadavg()
        .map((l) => l.toFixed(1))
        .join(" ")}\n`,
    );
    console.log("| | |");
    console.log("|---|---:|");
    console.log(`| RSS before the sockets | ${rssBefore.toFixed(1)} MB |`);
    console.log(`| RSS with ${SUBSCRIBERS} idle subscriptions | ${rssIdle.toFixed(1)} MB |`);
    console.log(
      `| **their cost** | **${(rssIdle - rssBefore).toFixed(1)} MB** (${(((rssIdle - rssBefore) * 1024) / SUBSCRIBERS).toFixed(1)} KB each) |`,
    );
    console.log(
      `| one event to all, create sent → all received (median, max) | ${sorted[Math.floor(sorted.length / 2)]!.toFixed(0)} ms, ${sorted.at(-1)!.toFixed(0)} ms |`,
    );
    console.log(
      `| service CPU per event (incl. the create) | ${cpu.toFixed(0)} ms (${((cpu * 1000) / SUBSCRIBERS).toFixed(0)} µs per subscriber) |`,
    );
  } finally {
    for (const c of clients) await c.dispose();
    running.child.kill("SIGTERM");
    await running.exited;
    await services.close();
    await rm(dataDir, { recursive: true, force: true });
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
