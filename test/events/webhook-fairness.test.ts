// Webhooks fair per tenant (issue 18 §3): one tenant's receivers that never answer hold at most
// WEBHOOK_CONCURRENCY_PER_TENANT delivery slots, so another tenant's deliveries go out at once;
// and a tenant has at most WEBHOOK_MAX_PER_TENANT registrations (409 WEBHOOK_LIMIT_REACHED).
// Real HTTP receivers on loopback.
import { describe, expect, it } from "vitest";
import { createDeliveryWorker } from "../../src/events/webhooks/delivery.ts";
import { BACKENDS } from "../helpers/env.ts";
import type { Client } from "../write/http.ts";
import { eventually } from "./support.ts";
import { webhookSuite } from "./webhook-setup.ts";

const PER_TENANT = 8;
const MAX_PER_TENANT = 12;

describe.each(BACKENDS)("webhooks fair per tenant (%s)", (backend) => {
  const suite = webhookSuite(backend, {
    users: ["anna", "greta"],
    allowPrivate: true,
    env: {
      // The defaults of the report: 32 slots, 4 per registration.
      WEBHOOK_CONCURRENCY: "32",
      WEBHOOK_CONCURRENCY_PER_RECEIVER: "4",
      WEBHOOK_CONCURRENCY_PER_TENANT: String(PER_TENANT),
      WEBHOOK_MAX_PER_TENANT: String(MAX_PER_TENANT),
    },
  });
  const { anna, greta } = suite.clients;
  const createCity = async (c: Client) => (await suite.createCity(c)).eventId;
  const register = (c: Client, url: string, extra: Record<string, unknown> = {}) =>
    suite.register(c, { url, events: ["CITYCreated"], ...extra });
  const webhookCount = async (c: Client) => (await c.get("/api/v4/webhooks")).body.data.length as number;

  it("ten registrations to a receiver that never answers hold the tenant's share of the slots; another tenant's delivery arrives at once", async () => {
    // (Registrations are cancelled after the test before the receivers close, so that the closed
    // receiver's failures do not start the next ones.)
    const dead = await suite.receiver(() => "hang");
    const alive = await suite.receiver();
    const hooks: Array<[Client, string]> = [];
    for (let i = 0; i < 10; i++)
      hooks.push([anna, await register(anna, dead.url, { retry_count: 0, timeout_ms: 30_000 })]);
    // 40 deliveries for tenant A: without the tenant's bound, 10 × 4 would take all 32 slots.
    for (let i = 0; i < 4; i++) await createCity(anna);
    await dead.waitFor(PER_TENANT);

    hooks.push([greta, await register(greta, alive.url)]);
    const started = Date.now();
    const eventId = await createCity(greta);
    await alive.waitFor(1, 10_000);
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(alive.requests[0]!.body.event_id).toBe(eventId);
    // Tenant A still sends its share only; beyond twice that, its deliveries wait, claimed by none.
    expect(dead.requests).toHaveLength(PER_TENANT);
    // (The sample fixture's own CITYCreated events may still be on their way to the subscriber
    // when the first registration is made, so a registration can have more than these 40.)
    // The claims wrote nothing to the rows they did not take: no row lock left on a waiting one
    // (a lock-only xmax), however many claims looked at them.
    const { rows } = await suite.app.t.services.db.query<{
      claimed: number;
      waiting: number;
      locked: number;
    }>(
      `SELECT count(*) FILTER (WHERE "ATTEMPTS" > 0)::int AS claimed,
                count(*) FILTER (WHERE "ATTEMPTS" = 0)::int AS waiting,
                count(*) FILTER (WHERE "ATTEMPTS" = 0 AND xmax::text <> '0')::int AS locked
           FROM "TB_WEBHOOK_DELIVERY"
          WHERE "WEBHOOK_ID" = ANY($1::int[]) AND "STATUS" = 'pending'`,
      [hooks.filter(([c]) => c === anna).map(([, id]) => Number(id))],
    );
    // Claimed: the share being sent and as many held ahead of their turn (claimed ahead).
    expect(rows[0]!.claimed).toBe(2 * PER_TENANT);
    expect(rows[0]!.waiting).toBeGreaterThanOrEqual(40 - 2 * PER_TENANT);
    expect(rows[0]!.locked).toBe(0);
  });

  it("two workers on one database: each event is delivered once, no delivery claimed twice", async () => {
    const receiver = await suite.receiver();
    const webhookId = await register(anna, receiver.url);
    const { db, logger } = suite.app.t.services;
    // A second worker beside the runtime's (another process's), asking every 5 ms: they race.
    const second = createDeliveryWorker({
      db,
      logger,
      retryBaseMs: 1000,
      allowPrivate: true,
      concurrency: 32,
      concurrencyPerReceiver: 4,
      concurrencyPerTenant: PER_TENANT,
      pollMs: 5,
    });
    second.start();
    try {
      const events: string[] = [];
      for (let i = 0; i < 30; i++) events.push(await createCity(anna));
      await eventually(
        async () => {
          const { rows } = await db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "TB_WEBHOOK_LOG" WHERE "WEBHOOK_ID" = $1 AND "STATUS" = 'success'`,
            [Number(webhookId)],
          );
          return rows[0]!.n >= events.length;
        },
        { what: "every delivery recorded" },
      );
      const delivered = receiver.requests.map((r) => r.body.event_id as string);
      expect(new Set(delivered).size).toBe(delivered.length);
      expect(delivered.filter((id) => events.includes(id)).sort()).toEqual([...events].sort());
      const { rows } = await db.query<{ status: string; attempts: number; n: number }>(
        `SELECT "STATUS" AS status, "ATTEMPTS" AS attempts, count(*)::int AS n
           FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" = $1 AND "OUTBOX_ID" = ANY($2::bigint[])
          GROUP BY 1, 2`,
        [Number(webhookId), events],
      );
      expect(rows).toEqual([{ status: "success", attempts: 1, n: events.length }]);
    } finally {
      await second.stop();
    }
  });

  it("a tenant's registrations are capped: one more is 409 WEBHOOK_LIMIT_REACHED, other tenants unaffected", async () => {
    const url = "http://127.0.0.1:9/cap";
    const have = await webhookCount(anna);
    for (let i = have; i < MAX_PER_TENANT - 2; i++) await register(anna, url);
    // Five at once for the last two places: exactly two are created.
    const racing = await Promise.all(
      Array.from({ length: 5 }, () => anna.post("/api/v4/webhooks", { url, events: ["CITYCreated"] })),
    );
    expect(racing.map((r) => r.status).sort()).toEqual([201, 201, 409, 409, 409]);
    expect(await webhookCount(anna)).toBe(MAX_PER_TENANT);

    const refused = await anna.post("/api/v4/webhooks", { url, events: ["CITYCreated"] });
    expect(refused.status).toBe(409);
    expect(refused.body).toMatchObject({
      status: 409,
      code: "WEBHOOK_LIMIT_REACHED",
      message: expect.stringContaining(String(MAX_PER_TENANT)),
    });
    // Another tenant registers as before.
    const theirs = await register(greta, url);
    await greta.delete(`/api/v4/webhooks/${theirs}`);
    // A deleted registration frees its place.
    const mine = (await anna.get("/api/v4/webhooks")).body.data as Array<{ webhook_id: string }>;
    expect((await anna.delete(`/api/v4/webhooks/${mine[0]!.webhook_id}`)).status).toBe(200);
    await register(anna, url);
    expect(await webhookCount(anna)).toBe(MAX_PER_TENANT);
  });
});
