// ROLE=relay and ROLE=webhooks as processes of their own (issue 10): each serves only the health
// checks and does its event work (ROLE=webhooks: the webhooks and the service's own subscribers). The relay, started on a database with an unpublished outbox row,
// publishes it (PUBLISHED_AT set) and stops cleanly. Both need PostgreSQL and RabbitMQ (on the
// embedded database and the in-process bus they are refused at start: test/foundation/config.test.ts).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseHandle } from "../../src/db/database.ts";
import { loadConfig } from "../../src/config.ts";
import { migrate } from "../../src/db/migrate.ts";
import { insertOutboxEvent } from "../../src/events/outbox.ts";
import { inProcessBusWarning } from "../../src/events/runtime.ts";
import { createTestDatabase, TEST_AMQP_URL, TEST_DATABASE_URL } from "../helpers/env.ts";
import { eventually } from "./support.ts";
import { freePort, spawnScript, waitReady } from "../helpers/process.ts";

it("a relaying process on PostgreSQL without AMQP_URL is warned that it takes a shared outbox's events", () => {
  const pg = "postgres://u@db:5432/app";
  expect(inProcessBusWarning({ role: "all", databaseUrl: pg, amqpUrl: null })).toMatch(
    /^events go to this process's in-process bus \(AMQP_URL is not set\): run one such process per database/,
  );
  // Alone on its embedded database, with RabbitMQ, or without a relay: nothing to warn about.
  expect(inProcessBusWarning({ role: "all", databaseUrl: null, amqpUrl: null })).toBeNull();
  expect(inProcessBusWarning({ role: "all", databaseUrl: pg, amqpUrl: "amqp://mq" })).toBeNull();
  expect(inProcessBusWarning({ role: "write", databaseUrl: pg, amqpUrl: null })).toBeNull();
});

it("without PostgreSQL and RabbitMQ, ROLE=relay and ROLE=webhooks refuse to start (the embedded defaults are one process's)", () => {
  for (const role of ["relay", "webhooks"])
    expect(() => loadConfig({ ROLE: role })).toThrow(/ROLE: .* needs DATABASE_URL .* and AMQP_URL/);
});

// Defined where PostgreSQL and RabbitMQ run (no skipped tests).
if (TEST_DATABASE_URL && TEST_AMQP_URL)
  describe("event roles as separate processes (PostgreSQL, RabbitMQ)", () => {
    let db: DatabaseHandle & { connectionString: string };
    let eventId: string;
    let dir: string;
    const shared = () => ({
      DATA_DIR: dir,
      DATABASE_URL: db.connectionString,
      AMQP_URL: TEST_AMQP_URL!,
      EVENTS_EXCHANGE: `dimensio.test.roles.${process.pid}`,
    });
    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "dimensio-roles-"));
      db = (await createTestDatabase("postgres", { direct: true })) as DatabaseHandle & {
        connectionString: string;
      };
      await migrate(db);
      eventId = await insertOutboxEvent(db, {
        dim: "CITY",
        kind: "Created",
        recordId: "R1",
        tenantId: "acme",
        payload: { CITY_ID: "R1" },
      });
    });
    afterAll(async () => {
      await db?.close();
      await rm(dir, { recursive: true, force: true });
    });

    it("ROLE=relay publishes what is pending, serves only health checks, and stops on SIGTERM", async () => {
      const port = await freePort();
      const running = spawnScript("src/main.ts", [], {
        ...shared(),
        ROLE: "relay",
        PORT: String(port),
        DEMO_DATA: "false",
        EVENTS_POLL_MS: "100",
      });
      const base = `http://127.0.0.1:${port}`;
      try {
        await waitReady(base, running);
        expect((await fetch(`${base}/healthz`)).status).toBe(200);
        expect((await fetch(`${base}/api/v4/core/CITY?source=anag-3`)).status).toBe(404);
        expect((await fetch(`${base}/auth/login`, { method: "POST" })).status).toBe(404);
      } finally {
        running.child.kill("SIGTERM");
      }
      expect(await running.exited).toBe(0);
      // The relay marked the row once published.
      const { rows } = await db.query<{ PUBLISHED_AT: Date | null }>(
        `SELECT "PUBLISHED_AT" FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" = $1`,
        [eventId],
      );
      expect(rows[0]?.PUBLISHED_AT).toBeInstanceOf(Date);
    });

    it("ROLE=webhooks serves only health checks and runs the subscribers: a relay's event is counted", async () => {
      const counted = await insertOutboxEvent(db, {
        dim: "CITY",
        kind: "Updated",
        recordId: "R1",
        tenantId: "acme",
        payload: { CITY_ID: "R1" },
      });
      const port = await freePort();
      const consumers = spawnScript("src/main.ts", [], {
        ...shared(),
        ROLE: "webhooks",
        PORT: String(port),
        DEMO_DATA: "false",
      });
      const base = `http://127.0.0.1:${port}`;
      let relay: ReturnType<typeof spawnScript> | null = null;
      try {
        // Ready once its queues are bound: the relay started next publishes to them.
        await waitReady(base, consumers);
        expect((await fetch(`${base}/api/v4/webhooks`)).status).toBe(404);
        const relayPort = await freePort();
        relay = spawnScript("src/main.ts", [], {
          ...shared(),
          ROLE: "relay",
          PORT: String(relayPort),
          DEMO_DATA: "false",
          EVENTS_POLL_MS: "100",
        });
        await waitReady(`http://127.0.0.1:${relayPort}`, relay);
        // The analytics writer of the webhooks process counts the event (a split deployment ran
        // the subscribers nowhere before).
        const stats = await eventually(async () => {
          const { rows } = await db.query<{ COUNT: string | number }>(
            `SELECT "COUNT" FROM "TB_EVENT_STATS" WHERE "TENANT_ID" = 'acme' AND "EVENT_TYPE" = 'CITYUpdated'`,
          );
          return rows[0];
        });
        expect(Number(stats.COUNT)).toBe(1);
        const consumed = await db.query(
          `SELECT 1 FROM "TB_EVENT_CONSUMED" WHERE "SUBSCRIBER" = 'analytics' AND "OUTBOX_ID" = $1`,
          [counted],
        );
        expect(consumed.rows).toHaveLength(1);
      } finally {
        relay?.child.kill("SIGTERM");
        consumers.child.kill("SIGTERM");
      }
      if (relay) expect(await relay.exited).toBe(0);
      expect(await consumers.exited).toBe(0);
    });
  });
