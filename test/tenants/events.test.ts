// The event side with databases per tenant (issue 36 §2, decisions.md §18): one relay per
// database, so every database's events are published, in order per record; a tenant of a profile
// gets its webhooks and its GraphQL subscriptions; OUTBOX_IDs are per database, and an event of one
// database is not taken for another's with the same id; totals are kept per database.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OutboxMessage } from "../../src/events/bus.ts";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { bearer, listenAndLogin, loginOverHttp, UNLIMITED_ENV } from "../helpers/auth.ts";
import { createTestApp, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";
import { eventually, webhookReceiver } from "../events/support.ts";
import { subscribe } from "../graphql/sse.ts";
import { createProfileDatabase, type ProfileDatabase, sampleWithGlobexOn } from "./helpers.ts";

if (TEST_DATABASE_URL)
  describe("events of a tenant on a database profile (postgres)", () => {
    let eu: ProfileDatabase;
    let t: TestApp;
    let runtime: EventRuntime;
    let base: string;
    let greta: string;
    let anna: string;
    const feed: OutboxMessage[] = [];
    beforeAll(async () => {
      eu = await createProfileDatabase();
      t = await createTestApp("postgres", {
        fixture: await sampleWithGlobexOn("EU"),
        env: {
          ...UNLIMITED_ENV,
          DATABASE_URL_EU: eu.url,
          WEBHOOK_ALLOW_PRIVATE: "true",
          // Deliveries and publishing follow the commits' wake-ups, never the safety-net poll.
          EVENTS_POLL_MS: "60000",
          COUNT_CACHE_MS: "60000",
        },
      });
      await t.services.feed.listen((m) => feed.push(m));
      runtime = await startEventRuntime(t.services, { relay: true, webhooks: true, subscribers: true });
      ({ base, token: greta } = await listenAndLogin(t.app, "greta", "greta-secret-4"));
      anna = await loginOverHttp(base, "anna", "anna-secret-1");
    });
    afterAll(async () => {
      await runtime?.stop();
      await t?.close();
      await eu?.drop();
    });

    const post = (token: string, url: string, payload: unknown) =>
      t.app.inject({ method: "POST", url, headers: bearer(token), payload: payload as object });
    const createCity = async (token: string, id: string) => {
      const res = await post(token, "/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: id, NAME: id, COUNTRY: "CH" },
      });
      expect(res.statusCode, res.body).toBe(201);
      return res.json().event_id as string;
    };

    it("runs one relay per database and publishes the profile's events, in order per record", async () => {
      expect([...runtime.relays.keys()]).toEqual([null, "EU"]);
      const created = await createCity(greta, "EV-1");
      for (const name of ["EV-1a", "EV-1b"]) {
        const res = await t.app.inject({
          method: "PATCH",
          url: "/api/v4/core/CITY/EV-1?source=anag-3",
          headers: bearer(greta),
          payload: { data: { NAME: name } },
        });
        expect(res.statusCode, res.body).toBe(200);
      }
      await eventually(() => feed.filter((m) => m.AGGREGATE_ID === "EV-1").length === 3);
      const mine = feed.filter((m) => m.AGGREGATE_ID === "EV-1");
      expect(mine.map((m) => [m.TENANT_ID, m.EVENT_TYPE])).toEqual([
        ["globex", "CITYCreated"],
        ["globex", "CITYUpdated"],
        ["globex", "CITYUpdated"],
      ]);
      expect(mine[0]!.OUTBOX_ID).toBe(created);
      // Published rows are marked in the profile's outbox.
      await eventually(
        async () =>
          (
            await eu.query<{ n: number }>(
              `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_ID" = 'EV-1' AND "PUBLISHED_AT" IS NULL`,
            )
          )[0]!.n === 0,
      );
    });

    it("an event of one database is not taken for another's with the same OUTBOX_ID", async () => {
      const { rows } = await t.services.db.query<{ next: string }>(
        `SELECT last_value + 1 AS next FROM "TB_ANAG_OUTBOX00_OUTBOX_ID_seq"`,
      );
      const next = Number(rows[0]!.next);
      await eu.query(`SELECT setval('"TB_ANAG_OUTBOX00_OUTBOX_ID_seq"', $1, false)`, [next]);
      const inMain = await createCity(anna, "SAME-MAIN");
      const inEu = await createCity(greta, "SAME-EU");
      expect(inEu).toBe(inMain);
      await eventually(() => feed.some((m) => m.AGGREGATE_ID === "SAME-MAIN"));
      await eventually(() => feed.some((m) => m.AGGREGATE_ID === "SAME-EU"));
      // The subscribers deduplicate in each event's own database: analytics counted both.
      const counted = async (db: "main" | "eu") => {
        const sql = `SELECT "SUBSCRIBER" FROM "TB_EVENT_CONSUMED" WHERE "OUTBOX_ID" = $1 ORDER BY 1`;
        return db === "main"
          ? (await t.services.db.query(sql, [inMain])).rows.map((r) => r.SUBSCRIBER)
          : (await eu.query(sql, [inEu])).map((r) => r.SUBSCRIBER);
      };
      await eventually(async () => (await counted("main")).includes("analytics"));
      await eventually(async () => (await counted("eu")).includes("analytics"));
    });

    it("delivers a profile tenant's webhooks; registrations and deliveries live in its database", async () => {
      const receiver = await webhookReceiver();
      try {
        const reg = await post(greta, "/api/v4/webhooks", { url: receiver.url, events: ["CITYCreated"] });
        expect(reg.statusCode, reg.body).toBe(201);
        const id = reg.json().webhook_id as string;
        expect(await eu.query(`SELECT "SOURCE" FROM "TB_WEBHOOK" WHERE "WEBHOOK_ID" = $1`, [id])).toEqual([
          { SOURCE: "globex" },
        ]);
        expect(
          (await t.services.db.query(`SELECT 1 FROM "TB_WEBHOOK" WHERE "SOURCE" = 'globex'`)).rows,
        ).toEqual([]);
        const eventId = await createCity(greta, "HOOKED");
        await receiver.waitFor(1);
        expect(receiver.requests[0]!.body).toMatchObject({
          event_id: eventId,
          event_type: "CITYCreated",
          record_id: "HOOKED",
        });
        await eventually(
          async () =>
            (await eu.query(`SELECT "STATUS" FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" = $1`, [id]))[0]
              ?.STATUS === "success",
        );
        const deliveries = await t.app.inject({
          method: "GET",
          url: `/api/v4/webhooks/${id}/deliveries`,
          headers: bearer(greta),
        });
        expect(deliveries.statusCode, deliveries.body).toBe(200);
        expect(deliveries.json().data).toHaveLength(1);
      } finally {
        await receiver.close();
      }
    });

    it("a GraphQL subscription of a profile tenant gets its events", async () => {
      const sub = await subscribe(
        base,
        greta,
        `subscription { CITY_events(source: "anag-3") { event_type record_id } }`,
      );
      try {
        expect(sub.status).toBe(200);
        // Created until the subscription, started asynchronously, sees one.
        let n = 0;
        await eventually(async () => {
          await createCity(greta, `SUB-${++n}`);
          return sub.events.some((e) => e.data?.data?.CITY_events?.record_id?.startsWith("SUB-"));
        });
        const got = sub.events.find((e) => e.data?.data?.CITY_events)!.data.data.CITY_events;
        expect(got).toMatchObject({ event_type: "CITYCreated", record_id: expect.stringMatching(/^SUB-/) });
      } finally {
        await sub.close();
      }
    });

    it("keeps totals per database: a profile's write forgets its totals", async () => {
      const total = async () => {
        const res = await t.app.inject({
          method: "GET",
          url: "/api/v4/core/CITY?source=anag-3&$num_rows=1",
          headers: bearer(greta),
        });
        expect(res.statusCode, res.body).toBe(200);
        return res.json().meta.total as number;
      };
      // The profile's totals cache keeps the total (its LISTEN is on the profile's database)…
      const totals = t.services.forTenant("globex").totals;
      expect(totals).not.toBe(t.services.totals);
      const before = await eventually(async () => {
        const n = await total();
        return totals.size() > 0 ? n : undefined;
      });
      expect(await total()).toBe(before);
      // …and forgets it when a write to the profile commits.
      await createCity(greta, "TOTAL-1");
      expect(await total()).toBe(before + 1);
    });
  });
