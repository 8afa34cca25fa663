// GraphQL subscriptions over SSE (graphql.md: D_events; issue 10): a real HTTP server on loopback,
// fed by the relay through the bus; each subscriber gets its own tenant's events only, with the
// fields it may read in detail.
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { eventually } from "../events/support.ts";
import { client, NO_RATE_LIMITS } from "../write/http.ts";
import { subscribe } from "./sse.ts";

describe.each(BACKENDS)("GraphQL subscriptions over SSE (%s)", (backend) => {
  let t: TestApp;
  let base: string;
  let runtime: EventRuntime;
  const tokens: Record<string, string> = {};

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, EVENTS_POLL_MS: "60000" },
    });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    for (const user of ["anna", "greta", "lucia"] as const) {
      tokens[user] = await loginAs(t.app, SAMPLE_USERS[user].username, SAMPLE_USERS[user].password);
    }
    runtime = await startEventRuntime(t.services, { relay: true });
    // The fixture's own events go out first: the subscriptions below see only the tests' writes.
    await eventually(
      async () => {
        const { rows } = await t.services.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`,
        );
        return rows[0]!.n === 0;
      },
      { what: "the fixture's events published" },
    );
  });
  afterAll(async () => {
    await runtime?.stop();
    await t?.close();
  });

  it("a subscriber receives its tenant's events and not another tenant's", async () => {
    const query = `subscription { CITY_events(source: "anag-3") { event_id event_type dimension record_id timestamp data } }`;
    const anna = await subscribe(base, tokens.anna!, query);
    const greta = await subscribe(base, tokens.greta!, query);
    try {
      expect(anna.status).toBe(200);
      expect(anna.contentType).toMatch(/text\/event-stream/);
      const theirs = await client(t.app, tokens.greta!).post("/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: "GX1", NAME: "Globex City", COUNTRY: "US" },
      });
      const ours = await client(t.app, tokens.anna!).post("/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: "AC1", NAME: "Acme City", COUNTRY: "IT" },
      });
      expect([theirs.status, ours.status]).toEqual([201, 201]);
      await anna.waitFor(1);
      await greta.waitFor(1);
      expect(anna.events[0]!.data.data.CITY_events).toEqual({
        event_id: ours.body.event_id,
        event_type: "CITYCreated",
        dimension: "CITY",
        record_id: "AC1",
        timestamp: expect.any(String),
        data: expect.objectContaining({ CITY_ID: "AC1", NAME: "Acme City", COUNTRY: "IT" }),
      });
      expect(greta.events[0]!.data.data.CITY_events).toMatchObject({
        event_id: theirs.body.event_id,
        record_id: "GX1",
      });
      // One more event of each tenant: still each only its own.
      await client(t.app, tokens.anna!).patch("/api/v4/core/CITY/AC1?source=anag-3", {
        data: { NAME: "Acme Town" },
      });
      await anna.waitFor(2);
      expect(anna.events[1]!.data.data.CITY_events).toMatchObject({
        event_type: "CITYUpdated",
        record_id: "AC1",
      });
      expect(anna.events.map((e) => e.data.data.CITY_events.record_id)).toEqual(["AC1", "AC1"]);
      expect(greta.events.map((e) => e.data.data.CITY_events.record_id)).toEqual(["GX1"]);
    } finally {
      await anna.close();
      await greta.close();
    }
  });

  it("data holds only the fields the subscriber may read in detail; event_types filters", async () => {
    const fields = `{ event_type record_id data }`;
    const lucia = await subscribe(
      base,
      tokens.lucia!,
      `subscription { CUST_events(source: "anag-1") ${fields} }`,
    );
    const anna = await subscribe(
      base,
      tokens.anna!,
      `subscription { CUST_events(source: "anag-1", event_types: ["CUSTUpdated"]) ${fields} }`,
    );
    try {
      const annaRest = client(t.app, tokens.anna!);
      const created = await annaRest.post("/api/v4/core/CUST?source=anag-1", {
        data: { NAME: "Sub Customer", CREDIT_LIMIT: 1234.5 },
      });
      expect(created.status).toBe(201);
      const id = String(created.body.data.CUST_ID);
      await annaRest.patch(`/api/v4/core/CUST/${id}?source=anag-1`, { data: { NAME: "Sub Customer 2" } });
      await lucia.waitFor(2);
      await anna.waitFor(1);
      const [createdEvent] = lucia.events.map((e) => e.data.data.CUST_events);
      expect(createdEvent).toMatchObject({ event_type: "CUSTCreated", record_id: id });
      expect(createdEvent.data.NAME).toBe("Sub Customer");
      // CREDIT_LIMIT needs peso 2 (lucia has 3); RISK_SCORE and INTERNAL carry no D flag.
      expect(createdEvent.data).not.toHaveProperty("CREDIT_LIMIT");
      expect(createdEvent.data).not.toHaveProperty("RISK_SCORE");
      expect(createdEvent.data).not.toHaveProperty("INTERNAL");
      expect(anna.events.map((e) => e.data.data.CUST_events.event_type)).toEqual(["CUSTUpdated"]);
      expect(anna.events[0]!.data.data.CUST_events.data.CREDIT_LIMIT).toBe(1234.5);
    } finally {
      await lucia.close();
      await anna.close();
    }
  });

  // A dimension lucia reads through no node is not in her schema (test/graphql/schema-profiles.test.ts);
  // one she reads, through a source that does not serve it, is refused when subscribed.
  it("a subscription needs the read grant on its source, and a token", async () => {
    const refused = await subscribe(
      base,
      tokens.lucia!,
      `subscription { CUST_events(source: "sales-1") { event_id } }`,
    );
    await refused.waitFor(1);
    expect(refused.events[0]!.data.errors[0].extensions).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      status: 403,
    });
    await refused.close();
    // An event type the dimension does not have would never arrive: refused, naming its types.
    const unknownType = await subscribe(
      base,
      tokens.anna!,
      `subscription { CUST_events(source: "anag-1", event_types: ["CITYCreated"]) { event_id } }`,
    );
    await unknownType.waitFor(1);
    expect(unknownType.events[0]!.data.errors[0]).toMatchObject({
      message:
        'event_types: "CITYCreated" is not an event of CUST; its events are CUSTCreated, CUSTUpdated, CUSTDeleted.',
      extensions: { code: "INVALID_PARAMETER", status: 400 },
    });
    await unknownType.close();
    const res = await fetch(`${base}/graphql`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "text/event-stream" },
      body: JSON.stringify({ query: `subscription { CITY_events(source: "anag-3") { event_id } }` }),
    });
    expect(res.status).toBe(401);
  });
});
