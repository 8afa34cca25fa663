// Quiet when idle (issue 18 §2): the service (`src/main.ts`, ROLE=all) on PostgreSQL, once idle,
// runs no more statements than its safety-net polls: at the defaults (EVENTS_POLL_MS 5000, the
// relay and the webhook worker each asking one question per poll) at most 1 a second. Every
// statement of every connection is counted on the wire, by a proxy in front of PostgreSQL. On the
// embedded database (in process: PGlite has no wire) the database handle counts them.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.ts";
import { startStatisticsJob } from "../../src/db/statistics.ts";
import { startEventRuntime } from "../../src/events/runtime.ts";
import { createTestServices, TEST_DATABASE_URL } from "../helpers/env.ts";
import { pgStatementCounter } from "../helpers/pg-wire.ts";
import { freePort, type Running, spawnScript, waitReady } from "../helpers/process.ts";
import { eventually } from "./support.ts";

const WINDOW_MS = 10_000;

describe.runIf(TEST_DATABASE_URL)("an idle process (PostgreSQL)", () => {
  const name = `dimensio_idle_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = () => new pg.Client({ connectionString: TEST_DATABASE_URL! });
  let counter: Awaited<ReturnType<typeof pgStatementCounter>>;
  let running: Running | null = null;

  beforeAll(async () => {
    const a = admin();
    await a.connect();
    await a.query(`CREATE DATABASE "${name}"`);
    await a.end();
    const url = new URL(TEST_DATABASE_URL!);
    counter = await pgStatementCounter(url.hostname, Number(url.port || 5432));
  });
  afterAll(async () => {
    if (running && running.child.exitCode === null) {
      running.child.kill("SIGTERM");
      await running.exited;
    }
    await counter?.close();
    const a = admin();
    await a.connect();
    await a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await a.end();
  });

  it("runs at most its safety-net polls: ≤ 1 statement a second at the defaults", async () => {
    const port = await freePort();
    const url = new URL(TEST_DATABASE_URL!);
    url.host = `127.0.0.1:${counter.port}`;
    url.pathname = `/${name}`;
    running = spawnScript("src/main.ts", [], {
      PORT: String(port),
      DATABASE_URL: url.toString(),
      JWT_SECRET: "idle-test-secret-idle-test-secret-0123456789",
      // The demo data: start-up writes events, which the relay, the subscribers (search index,
      // analytics) and the webhook dispatcher work off before the process goes idle.
      DEMO_DATA: "true",
    });
    const direct = new URL(TEST_DATABASE_URL!);
    direct.pathname = `/${name}`;
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, running);
    // The demo's events published: nothing left for the relay.
    await eventually(
      async () => {
        const c = new pg.Client({ connectionString: direct.toString() });
        await c.connect();
        try {
          const { rows } = await c.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`,
          );
          return rows[0]!.n === 0;
        } finally {
          await c.end();
        }
      },
      { timeoutMs: 60_000, what: "the demo's events published" },
    );
    // Idle: a second without a statement (a process that never gets there is measured anyway).
    await eventually(
      () => {
        const last = counter.statements.at(-1);
        return last === undefined || Date.now() - last.at > 1000;
      },
      { timeoutMs: 20_000, what: "a quiet second" },
    ).catch(() => undefined);
    const from = Date.now();
    await new Promise((r) => setTimeout(r, WINDOW_MS));
    const seen = counter.since(from);
    expect(
      seen.length,
      `statements of an idle process in ${WINDOW_MS} ms:\n${seen.map((s) => `${s.type} ${s.text}`).join("\n")}`,
    ).toBeLessThanOrEqual(WINDOW_MS / 1000);
    // They are the polls' questions, not claims.
    expect(seen.every((s) => !/FOR UPDATE/.test(s.text ?? ""))).toBe(true);
    expect(running.child.exitCode).toBeNull();
  });
});

describe("an idle process (embedded database)", () => {
  it("runs at most its safety-net polls and the statistics check", async () => {
    const statements: Array<{ at: number; text: string }> = [];
    const services = await createTestServices("pglite", {
      fixture: "sample",
      // The defaults (EVENTS_POLL_MS 5000, DB_ANALYZE_INTERVAL_MS 60000): what `npm start` runs.
      env: { DEMO_DATA: "false" },
      onStatement: (text) => statements.push({ at: Date.now(), text }),
    });
    const app = await buildApp(services);
    const runtime = await startEventRuntime(services, { relay: true, webhooks: true, subscribers: true });
    const statistics = startStatisticsJob({
      db: services.db,
      logger: services.logger,
      intervalMs: services.config.dbAnalyzeIntervalMs,
    });
    try {
      await eventually(
        () => {
          const last = statements.at(-1);
          return last === undefined || Date.now() - last.at > 1000;
        },
        { timeoutMs: 20_000, what: "a quiet second" },
      ).catch(() => undefined);
      const from = Date.now();
      await new Promise((r) => setTimeout(r, 5000));
      const seen = statements.filter((s) => s.at >= from);
      expect(seen.length, seen.map((s) => s.text).join("\n")).toBeLessThanOrEqual(5);
    } finally {
      await statistics.stop();
      await runtime.stop();
      await app.close();
      await services.close();
    }
  });
});
