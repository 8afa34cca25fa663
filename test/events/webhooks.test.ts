// Webhooks (issue 10, spec 4.7 and 6.1, decisions.md §8): the registration API, matching,
// signed delivery to real HTTP receivers on loopback, retries with their log rows, time-outs,
// a restart in the middle of a retry sequence, and a slow receiver next to a fast one. (Private
// addresses, refused without WEBHOOK_ALLOW_PRIVATE: webhook-addresses.test.ts.)
import { createHmac, timingSafeEqual } from "node:crypto";
import { describe, expect, it } from "vitest";
import { BACKENDS } from "../helpers/env.ts";
import { eventually } from "./support.ts";
import { deliveryLogWith, webhookSuite } from "./webhook-setup.ts";

const BASE_MS = 25;

describe.each(BACKENDS)("webhooks (%s)", (backend) => {
  const suite = webhookSuite(backend, {
    users: ["anna", "greta", "marco"],
    allowPrivate: true,
    env: { WEBHOOK_RETRY_BASE_MS: String(BASE_MS) },
    parts: { relay: true, webhooks: true, subscribers: true },
  });
  const { anna, greta, marco } = suite.clients;
  const register = (body: Record<string, unknown>) => suite.register(anna, body);
  const createCity = (country?: string) => suite.createCity(anna, country);
  const logWith = (webhookId: string, rows: number) => deliveryLogWith(anna, webhookId, rows);

  it("registration: created with its id and created_at, the secret only in that answer, tenant-scoped, level 4", async () => {
    const res = await anna.post("/api/v4/webhooks", {
      url: "https://hooks.example.com/in",
      events: ["CITYCreated", "CUSTUpdated"],
      dimensions: ["CITY", "CUST"],
      secret: "s3cret-s3cret-s3cret",
      filters: { COUNTRY: "IT" },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      webhook_id: expect.stringMatching(/^\d+$/),
      url: "https://hooks.example.com/in",
      events: ["CITYCreated", "CUSTUpdated"],
      dimensions: ["CITY", "CUST"],
      filters: { COUNTRY: "IT" },
      active: true,
      retry_count: 3,
      timeout_ms: 5000,
      secret: "s3cret-s3cret-s3cret",
    });
    expect(new Date(res.body.created_at).toISOString()).toBe(res.body.created_at);
    const id = res.body.webhook_id;

    const read = await anna.get(`/api/v4/webhooks/${id}`);
    expect(read.status).toBe(200);
    expect(read.body.secret).toBeUndefined();
    expect(
      (await anna.get("/api/v4/webhooks")).body.data.map((w: { webhook_id: string }) => w.webhook_id),
    ).toContain(id);

    const patched = await anna.patch(`/api/v4/webhooks/${id}`, { active: false, dimensions: [] });
    expect(patched.body).toMatchObject({ active: false, dimensions: [] });
    expect(patched.body.secret).toBeUndefined();

    // Another tenant's admin sees nothing of it; a level-3 user may not manage webhooks.
    expect((await greta.get(`/api/v4/webhooks/${id}`)).status).toBe(404);
    expect((await greta.get("/api/v4/webhooks")).body.data).toEqual([]);
    expect((await greta.delete(`/api/v4/webhooks/${id}`)).status).toBe(404);
    const refused = await marco.get("/api/v4/webhooks");
    expect(refused.status).toBe(403);
    expect(refused.body).toMatchObject({ code: "INSUFFICIENT_PERMISSIONS", required_grant: 4 });

    expect((await anna.delete(`/api/v4/webhooks/${id}`)).status).toBe(200);
    expect((await anna.get(`/api/v4/webhooks/${id}`)).status).toBe(404);
  });

  it("bad registrations are 400 with the field named", async () => {
    const ok = { url: "https://hooks.example.com/x", events: ["CITYCreated"] };
    const cases: [Record<string, unknown>, string][] = [
      [{ ...ok, url: "ftp://hooks.example.com/x" }, "url"],
      [{ ...ok, url: "https://user:pw@hooks.example.com/x" }, "url"],
      [{ ...ok, url: "not a url" }, "url"],
      [{ ...ok, events: ["CITYMoved"] }, "events"],
      [{ ...ok, events: ["NOPECreated"] }, "events"],
      [{ ...ok, events: [] }, "events"],
      [{ ...ok, dimensions: ["NOPE"] }, "dimensions"],
      [{ ...ok, secret: "short" }, "secret"],
      [{ ...ok, filters: { COUNTRY: { nested: true } } }, "filters"],
      // A filter on a field no covered dimension has could never match.
      [{ ...ok, filters: { NOPE: 1 } }, "filters"],
      [{ ...ok, events: ["*"], filters: { NOPE: 1 } }, "filters"],
      [{ ...ok, events: ["*"], dimensions: ["CUST"], filters: { COUNTRY: "IT" } }, "filters"],
      // Events named only of dimensions `dimensions` leaves out could never match.
      [{ ...ok, dimensions: ["CUST"] }, "dimensions"],
      [{ ...ok, retry_count: 99 }, "retry_count"],
      [{ ...ok, surprise: 1 }, "surprise"],
      [{ events: ["*"] }, "url"],
    ];
    for (const [body, field] of cases) {
      const res = await anna.post("/api/v4/webhooks", body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ status: 400, field });
    }
    expect((await anna.post("/api/v4/webhooks", [1])).status).toBe(400);
    expect((await anna.get("/api/v4/webhooks/abc")).status).toBe(404);
    // A change is judged on the registration as it will be: filters against its stored events.
    const made = await anna.post("/api/v4/webhooks", { ...ok, filters: { COUNTRY: "IT" } });
    expect(made.status).toBe(201);
    const patched = await anna.patch(`/api/v4/webhooks/${made.body.webhook_id}`, { filters: { NOPE: 1 } });
    expect(patched.body).toMatchObject({ status: 400, field: "filters" });
    expect((await anna.delete(`/api/v4/webhooks/${made.body.webhook_id}`)).status).toBe(200);
  });

  it("delivers the body of spec 6.1.2 with the four headers and a signature an independent HMAC verifies", async () => {
    const receiver = await suite.receiver();
    const secret = "a-receiver-secret-of-some-length";
    const hook = await register({ url: receiver.url, events: ["CITYCreated"], secret });
    const { id, eventId } = await createCity("PT");
    await receiver.waitFor(1);
    const [req] = receiver.requests;
    expect(req!.body).toEqual({
      event_id: eventId,
      event_type: "CITYCreated",
      timestamp: expect.any(String),
      dimension: "CITY",
      record_id: id,
      data: expect.objectContaining({ CITY_ID: id, NAME: `Hook ${id}`, COUNTRY: "PT" }),
    });
    expect(req!.headers["content-type"]).toBe("application/json");
    expect(req!.headers["x-service-event-type"]).toBe("CITYCreated");
    expect(req!.headers["x-service-event-id"]).toBe(eventId);
    expect(req!.headers["x-service-timestamp"]).toBe(req!.body.timestamp);
    const expected = Buffer.from(`sha256=${createHmac("sha256", secret).update(req!.raw).digest("hex")}`);
    const given = Buffer.from(String(req!.headers["x-service-signature"]));
    expect(given.length).toBe(expected.length);
    expect(timingSafeEqual(given, expected)).toBe(true);
    const rows = await logWith(hook, 1);
    expect(rows[0]).toMatchObject({
      STATUS: "success",
      HTTP_STATUS: 200,
      ATTEMPT_COUNT: 1,
      OUTBOX_ID: eventId,
    });
  });

  it("deliveries to one receiver reuse a kept-alive connection", async () => {
    const receiver = await suite.receiver();
    // Only this test's cities (the fixture's own events may still be on their way).
    const hook = await register({ url: receiver.url, events: ["CITYCreated"], filters: { COUNTRY: "KE" } });
    const ids: string[] = [];
    for (let n = 1; n <= 3; n++) {
      ids.push((await createCity("KE")).id);
      // Recorded as delivered: the attempt's answer has been read whole, its connection is free.
      await deliveryLogWith(anna, hook, n, "success");
    }
    expect(receiver.requests.map((r) => r.body.record_id)).toEqual(ids);
    expect(receiver.connections()).toBe(1);
  });

  it("matches on event type (or *), dimension and filters; no secret, no signature", async () => {
    const all = await suite.receiver();
    const wrongType = await suite.receiver();
    const wrongDim = await suite.receiver();
    const filtered = await suite.receiver();
    const hooks = [
      await register({ url: all.url, events: ["*"], dimensions: ["CITY"] }),
      await register({ url: wrongType.url, events: ["CITYDeleted"] }),
      await register({ url: wrongDim.url, events: ["*"], dimensions: ["CUST"] }),
      await register({ url: filtered.url, events: ["CITYCreated"], filters: { COUNTRY: "PT" } }),
    ];
    const it1 = await createCity("IT");
    const pt = await createCity("PT");
    await all.waitFor(2);
    await filtered.waitFor(1);
    // Deliveries to one receiver run concurrently: order is not promised (event_id tells).
    expect(all.requests.map((r) => r.body.record_id).sort()).toEqual([it1.id, pt.id].sort());
    expect(all.requests[0]!.headers["x-service-signature"]).toBeUndefined();
    expect(filtered.requests.map((r) => r.body.record_id)).toEqual([pt.id]);
    // Both events were dispatched (the receivers above got them): nothing was queued for the others.
    const { rows } = await suite.app.t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" = ANY($1::int[])`,
      [[Number(hooks[1]), Number(hooks[2])]],
    );
    expect(rows[0]!.n).toBe(0);
    expect(wrongType.requests).toHaveLength(0);
    expect(wrongDim.requests).toHaveLength(0);
  });

  it("a filter on force takes the force deletes only (their payload's marker, not a field)", async () => {
    const receiver = await suite.receiver(() => 200);
    await register({ url: receiver.url, events: ["*"], dimensions: ["CITY"], filters: { force: true } });
    const soft = await createCity();
    const hard = await createCity();
    expect((await anna.delete(`/api/v4/core/CITY/${soft.id}?source=anag-3`)).status).toBe(200);
    const forced = await anna.delete(`/api/v4/core/CITY/${hard.id}?source=anag-3&force=true`);
    expect(forced.status).toBe(200);
    await receiver.waitFor(1);
    expect(receiver.requests.map((r) => [r.body.event_type, r.body.record_id, r.body.data.force])).toEqual([
      ["CITYDeleted", hard.id, true],
    ]);
    expect(receiver.requests[0]!.body.event_id).toBe(forced.body.event_id);
  });

  it("a receiver that recovers on the third attempt: retried after 2 and 4 × the base wait, one log row per attempt", async () => {
    const receiver = await suite.receiver((n) => (n < 2 ? 500 : 200));
    const hook = await register({ url: receiver.url, events: ["CITYCreated"] });
    const { eventId } = await createCity();
    await receiver.waitFor(3);
    const [a, b, c] = receiver.requests.map((r) => r.at);
    expect(b! - a!).toBeGreaterThanOrEqual(2 * BASE_MS);
    expect(c! - b!).toBeGreaterThanOrEqual(4 * BASE_MS);
    expect(new Set(receiver.requests.map((r) => r.body.event_id))).toEqual(new Set([eventId]));
    const rows = await logWith(hook, 3);
    expect(rows.map((r: Record<string, unknown>) => [r.STATUS, r.ATTEMPT_COUNT, r.HTTP_STATUS])).toEqual([
      ["success", 3, 200],
      ["retrying", 2, 500],
      ["retrying", 1, 500],
    ]);
    expect(rows[1].ERROR_MESSAGE).toBe("HTTP 500");
  });

  it("failed after the last attempt (RETRY_COUNT + 1 attempts), and never tried again", async () => {
    const receiver = await suite.receiver(() => 503);
    const hook = await register({ url: receiver.url, events: ["CITYCreated"], retry_count: 2 });
    await createCity();
    await receiver.waitFor(3);
    const rows = await logWith(hook, 3);
    expect(rows.map((r: Record<string, unknown>) => [r.STATUS, r.ATTEMPT_COUNT])).toEqual([
      ["failed", 3],
      ["retrying", 2],
      ["retrying", 1],
    ]);
    const { rows: delivery } = await suite.app.t.services.db.query<{ STATUS: string }>(
      `SELECT "STATUS" FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" = $1`,
      [Number(hook)],
    );
    expect(delivery).toEqual([{ STATUS: "failed" }]);
    expect(receiver.requests).toHaveLength(3);
  });

  it("a receiver that does not answer within TIMEOUT_MS: the attempt fails as a time-out", async () => {
    const receiver = await suite.receiver(() => "hang");
    const hook = await register({
      url: receiver.url,
      events: ["CITYCreated"],
      retry_count: 0,
      timeout_ms: 200,
    });
    await createCity();
    await receiver.waitFor(1);
    const rows = await logWith(hook, 1);
    expect(rows[0]).toMatchObject({ STATUS: "failed", ATTEMPT_COUNT: 1, HTTP_STATUS: null });
    expect(rows[0].ERROR_MESSAGE).toMatch(/timed out after 200 ms/);
  });

  it("the dispatcher restarted in the middle of a retry sequence finishes it", async () => {
    const receiver = await suite.receiver((n) => (n === 0 ? 500 : 200));
    const hook = await register({ url: receiver.url, events: ["CITYCreated"] });
    await createCity();
    await receiver.waitFor(1);
    await logWith(hook, 1);
    // The pending retry is a row in the database; a new worker (a restarted process) takes it.
    await suite.app.restartRuntime();
    await receiver.waitFor(2);
    const rows = await logWith(hook, 2);
    expect(rows.map((r: Record<string, unknown>) => [r.STATUS, r.ATTEMPT_COUNT])).toEqual([
      ["success", 2],
      ["retrying", 1],
    ]);
  });

  it("a slow receiver does not delay a fast one", async () => {
    const slow = await suite.receiver(() => "hang");
    const fast = await suite.receiver();
    await register({ url: slow.url, events: ["CITYCreated"], retry_count: 0, timeout_ms: 10_000 });
    await register({ url: fast.url, events: ["CITYCreated"] });
    for (let i = 0; i < 10; i++) await createCity();
    // All ten reach the fast receiver while the slow one holds its few slots, unanswered.
    await fast.waitFor(10, 5000);
    expect(slow.requests.length).toBeLessThanOrEqual(
      suite.app.t.services.config.webhookConcurrencyPerReceiver,
    );
  });

  it("analytics: the events of the caller's tenant counted per dimension, type and day", async () => {
    await createCity();
    const today = new Date().toISOString().slice(0, 10);
    // Every CITYCreated event of the tenant today (the fixture's imported cities included).
    const { rows } = await suite.app.t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00"
        WHERE "TENANT_ID" = 'acme' AND "EVENT_TYPE" = 'CITYCreated' AND "CREATED_AT" >= $1::date`,
      [today],
    );
    const expected = rows[0]!.n;
    expect(expected).toBeGreaterThanOrEqual(suite.citiesCreated);
    const counts = await eventually(
      async () => {
        const res = await anna.get(`/api/v4/analytics/events?dimension=CITY&from=${today}`);
        const row = res.body.data.find((r: { event_type: string }) => r.event_type === "CITYCreated");
        return row && row.count >= expected ? res.body.data : undefined;
      },
      { what: "analytics counts" },
    );
    expect(counts.find((r: { event_type: string }) => r.event_type === "CITYCreated")).toMatchObject({
      dimension: "CITY",
      day: today,
      count: expected,
    });
    // The other tenant sees its own counts only (its fixture cities), none of acme's.
    const { rows: theirs } = await suite.app.t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "TENANT_ID" = 'globex' AND "EVENT_TYPE" = 'CITYCreated'`,
    );
    const other = await eventually(
      async () => {
        const data = (await greta.get("/api/v4/analytics/events?dimension=CITY")).body.data;
        return data.length && data[0].count >= theirs[0]!.n ? data : undefined;
      },
      { what: "the other tenant's counts" },
    );
    expect(other).toEqual([
      { dimension: "CITY", event_type: "CITYCreated", day: today, count: theirs[0]!.n },
    ]);
    expect(theirs[0]!.n).not.toBe(expected);
    expect((await anna.get("/api/v4/analytics/events?from=2026-02-30")).status).toBe(400);
    expect((await marco.get("/api/v4/analytics/events")).status).toBe(403);
  });
});
