// ROLE=relay and ROLE=webhooks as processes of their own (issue 10): each serves only the health
// checks and does its event work. The relay, started on a database with an unpublished outbox row,
// publishes it (PUBLISHED_AT set) and stops cleanly.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPglite } from "../../src/db/database.ts";
import { migrate } from "../../src/db/migrate.ts";
import { insertOutboxEvent } from "../../src/events/outbox.ts";
import { freePort, spawnScript, waitReady } from "../helpers/process.ts";

describe("event roles as separate processes (embedded database)", () => {
  let dir: string;
  let eventId: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dimensio-roles-"));
    const db = await openPglite(path.join(dir, "pgdata"));
    await migrate(db);
    eventId = await insertOutboxEvent(db, {
      dim: "CITY",
      kind: "Created",
      recordId: "R1",
      tenantId: "acme",
      payload: { CITY_ID: "R1" },
    });
    await db.close();
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("ROLE=relay publishes what is pending, serves only health checks, and stops on SIGTERM", async () => {
    const port = await freePort();
    const running = spawnScript("src/main.ts", [], {
      ROLE: "relay",
      DATA_DIR: dir,
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
    // The relay marked the row once published (the database is ours again once it stopped).
    const db = await openPglite(path.join(dir, "pgdata"));
    try {
      const { rows } = await db.query<{ PUBLISHED_AT: Date | null }>(
        `SELECT "PUBLISHED_AT" FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" = $1`,
        [eventId],
      );
      expect(rows[0]?.PUBLISHED_AT).toBeInstanceOf(Date);
    } finally {
      await db.close();
    }
  });

  it("ROLE=webhooks starts with only health checks", async () => {
    const port = await freePort();
    const running = spawnScript("src/main.ts", [], {
      ROLE: "webhooks",
      DATA_DIR: dir,
      PORT: String(port),
      DEMO_DATA: "false",
    });
    const base = `http://127.0.0.1:${port}`;
    try {
      await waitReady(base, running);
      expect((await fetch(`${base}/api/v4/webhooks`)).status).toBe(404);
    } finally {
      running.child.kill("SIGTERM");
    }
    expect(await running.exited).toBe(0);
  });
});
