// A webhook is bound to the read rights of its registrant (decisions.md §17; exploratory report
// findings 1, 2, 4, 6, 11): no event of a dimension they may not read (nothing at all once they are
// inactive), `data` limited to the fields they read in detail at their peso (as their own event
// subscription), filters only on fields they may read; a delivery claimed ahead is not sent once
// its registration is deleted, deactivated or moved to another URL; values PostgreSQL text cannot
// hold are a 400. Real HTTP receivers on loopback.
import { createHmac } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { loadUserGrants } from "../../src/auth/profile.ts";
import { subscribeToEvents } from "../../src/resolvers/read/events.ts";
import type { RequestContext } from "../../src/types.ts";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS } from "../helpers/env.ts";
import { type Client, client } from "../write/http.ts";
import { eventually, webhookReceiver } from "./support.ts";
import {
  deliveryLogWith,
  type Receiver,
  sampleWithMasterDataAdmins,
  webhookSuite,
  deliveryRows,
  eventIdsOf,
  receivedEvents,
} from "./webhook-setup.ts";

/** The fields of CUST a peso-3 user reads in detail (TB_COST D flag; CREDIT_LIMIT is weighted 2). */
const CUST_DETAIL_PESO3 = [
  "CUST_ID",
  "CODE",
  "NAME",
  "CITY_ID",
  "EMAIL",
  "VIP",
  "NOTES",
  "SALES_REP",
  "TREC",
  "CDATA",
  "OWNER",
  "LDATA",
  "LOWNER",
];

const signatureOf = (secret: string, raw: string) =>
  `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`;

/** A receiver whose requests wait until `answerAll()` (then every request is answered 200). */
async function heldReceiver() {
  let open = false;
  const gates: Array<() => void> = [];
  const receiver = await webhookReceiver(
    () =>
      new Promise<number>((resolve) => {
        if (open) resolve(200);
        else gates.push(() => resolve(200));
      }),
  );
  return {
    receiver,
    answerAll() {
      open = true;
      for (const g of gates.splice(0)) g();
    },
  };
}

describe.each(BACKENDS)("webhooks follow their registrant's read rights (%s)", (backend) => {
  const suite = webhookSuite(backend, {
    users: ["anna"],
    allowPrivate: true,
    fixture: sampleWithMasterDataAdmins(),
    // One attempt at a time per registration: the worker holds one more, claimed ahead.
    env: { WEBHOOK_RETRY_BASE_MS: "500", WEBHOOK_CONCURRENCY_PER_RECEIVER: "1" },
  });
  const { anna } = suite.clients;
  const as: Record<string, Client> = {};
  const receivers: Receiver[] = [];

  beforeAll(async () => {
    for (const name of ["anag2", "anag3"])
      as[name] = client(suite.app.t.app, await loginAs(suite.app.t.app, name, `${name}-secret-1`));
  });

  const db = () => suite.app.t.services.db;
  /** A receiver closed by the suite after the test. */
  const receiver = () => suite.receiver();
  const deliveries = (webhookId: string) => deliveryRows(db(), webhookId);
  const eventIds = eventIdsOf;
  const received = receivedEvents;
  const createProd = async () => {
    const res = await anna.post("/api/v4/core/PROD?source=catalog-1", {
      data: { NAME: "Hooked product", UNIT_PRICE: 7 },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.event_id as string;
  };
  let customers = 0;
  const createCust = async (data: Record<string, unknown> = {}) => {
    const res = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: {
        NAME: `Hook customer ${++customers}`,
        CREDIT_LIMIT: 4321,
        EMAIL: "c@example.com",
        NOTES: "n",
        ...data,
      },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.event_id as string;
  };
  const setUser = async (userId: string, column: "ACTIVE" | "PESO", value: boolean | string) => {
    await db().query(`UPDATE "TB_USER" SET "${column}" = $2 WHERE "USER_ID" = $1`, [userId, value]);
  };

  it("no event of a dimension the registrant may not read; none at all once inactive; a registration without a registrant gets everything", async () => {
    const control = await receiver();
    const mine = await receiver();
    const events = ["CITYCreated", "PRODCreated"];
    await suite.register(anna, { url: control.url, events });
    // anag2 is level 4 on the master data only: cities yes, products (catalog) no.
    expect((await as.anag2!.get("/api/v4/core/PROD?source=catalog-1")).status).toBe(403);
    const hook = await suite.register(as.anag2!, { url: mine.url, events });

    const city = await suite.createCity(anna);
    const prod = await createProd();
    await received(control, [city.eventId, prod]);
    await received(mine, [city.eventId]);
    expect((await deliveries(hook)).map((d) => d.OUTBOX_ID)).toEqual([city.eventId]);

    // The registrant deactivated: nothing more, not even of the unscoped dimension CITY, nor
    // metadata events (a table code, not a dimension) on an "*" registration.
    const everything = await receiver();
    const all = await suite.register(anna, { url: everything.url, events: ["*"] });
    const starred = await receiver();
    const star = await suite.register(as.anag2!, { url: starred.url, events: ["*"] });
    await setUser("anag2", "ACTIVE", false);
    try {
      const later = await suite.createCity(anna);
      await received(control, [later.eventId]);
      const meta = await anna.patch("/api/v4/core/DIM/CITY?source=erp", {
        data: { DESC_DIM: "Cities (hooked)" },
      });
      expect(meta.status, JSON.stringify(meta.body)).toBe(200);
      const [dimEvent] = await eventually(
        () => {
          const found = everything.requests.filter((q) => q.body.event_type === "DIMUpdated");
          return found.length > 0 && found;
        },
        { what: "the metadata event" },
      );
      expect(dimEvent!.body).toMatchObject({ dimension: "DIM", record_id: "CITY" });
      expect((await deliveries(all)).map((d) => d.OUTBOX_ID)).toContain(dimEvent!.body.event_id);
      expect((await deliveries(hook)).map((d) => d.OUTBOX_ID)).toEqual([city.eventId]);
      expect(await deliveries(star)).toEqual([]);
      expect(starred.requests).toEqual([]);
    } finally {
      await setUser("anag2", "ACTIVE", true);
      await anna.patch("/api/v4/core/DIM/CITY?source=erp", { data: { DESC_DIM: "Cities" } });
    }

    // A registration made before registrants were kept (none recorded) keeps getting every event.
    await db().query(`UPDATE "TB_WEBHOOK" SET "CREATED_BY" = NULL WHERE "WEBHOOK_ID" = $1`, [Number(hook)]);
    const legacy = await createProd();
    const [got] = (await received(mine, [legacy])).filter((q) => q.body.event_id === legacy);
    expect(got!.body).toMatchObject({ dimension: "PROD", data: { NAME: "Hooked product", UNIT_PRICE: 7 } });
    expect(eventIds(mine)).toEqual([city.eventId, legacy]);
  });

  it("data holds the fields the registrant reads in detail at their peso, as their subscription does, and is what is signed", async () => {
    const secret = "registrant-secret-0123456789";
    const full = await receiver();
    const narrow = await receiver();
    await suite.register(anna, { url: full.url, events: ["CUSTCreated"] });
    await suite.register(as.anag3!, { url: narrow.url, events: ["CUSTCreated"], secret });
    const context: RequestContext = {
      principal: {
        userId: "anag3",
        tenantId: "acme",
        sessionId: "t",
        peso: 3,
        centroDett: "HQ",
        ambiente: "production",
        lingua: null,
        grants: await loadUserGrants(db(), "anag3"),
      },
      source: "anag-1",
      centerDett: "HQ",
      requestId: "t",
      now: () => new Date(),
    } as RequestContext;
    const feed = await subscribeToEvents(suite.app.t.services, context, "CUST", ["CUSTCreated"]);
    try {
      const id = await createCust();
      const [mine] = await received(narrow, [id]);
      const [whole] = await received(full, [id]);
      const subscribed = await feed.next();
      expect(subscribed.value?.event_id).toBe(id);

      expect(Object.keys(mine!.body.data).sort()).toEqual([...CUST_DETAIL_PESO3].sort());
      expect(Object.keys(mine!.body.data).sort()).toEqual(Object.keys(subscribed.value!.data!).sort());
      expect(mine!.body.data).toMatchObject({ EMAIL: "c@example.com", NOTES: "n" });
      // The peso-1 tenant administrator reads CREDIT_LIMIT; no one reads RISK_SCORE (R only) or INTERNAL.
      expect(Object.keys(whole!.body.data).sort()).toEqual([...CUST_DETAIL_PESO3, "CREDIT_LIMIT"].sort());
      expect(whole!.body.data.CREDIT_LIMIT).toBe(4321);
      // The signature covers the body sent.
      expect(mine!.headers["x-service-signature"]).toBe(signatureOf(secret, mine!.raw));
    } finally {
      await feed.return?.();
    }
  });

  it("a force delete keeps its force marker in data", async () => {
    const got = await receiver();
    await suite.register(anna, { url: got.url, events: ["CITYDeleted"] });
    const { id } = await suite.createCity(anna);
    const res = await anna.delete(`/api/v4/core/CITY/${id}?source=anag-3&force=true`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    await got.waitFor(1);
    expect(got.requests[0]!.body).toMatchObject({
      event_type: "CITYDeleted",
      record_id: id,
      data: { CITY_ID: id, force: true },
    });
  });

  it("a filter on a field the registrant may not read is refused with 400 naming filters; one hidden later withholds the events", async () => {
    const url = "https://hooks.example.com/f";
    const refused: [Client, Record<string, unknown>, string][] = [
      // Hidden by peso (weighted 2; anag3 is peso 3).
      [as.anag3!, { events: ["CUSTCreated"], filters: { CREDIT_LIMIT: 1 } }, "CREDIT_LIMIT"],
      // Neither L nor D (R only; no flag at all).
      [as.anag3!, { events: ["CUSTCreated"], filters: { RISK_SCORE: 1 } }, "RISK_SCORE"],
      [anna, { events: ["CUSTCreated"], filters: { INTERNAL: "x" } }, "INTERNAL"],
      // A dimension the registrant may not read.
      [as.anag2!, { events: ["ORDCreated"], filters: { TOTAL: 1 } }, "TOTAL"],
      [as.anag2!, { events: ["*"], filters: { UNIT_PRICE: 1 } }, "UNIT_PRICE"],
    ];
    for (const [who, body, field] of refused) {
      const res = await who.post("/api/v4/webhooks", { url, ...body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ status: 400, code: "INVALID_FIELD", field: "filters" });
      expect(res.body.message).toContain(field);
    }
    await suite.register(as.anag3!, { url, events: ["CUSTCreated"], filters: { NAME: "x" } });
    await suite.register(as.anag2!, { url, events: ["CUSTCreated"], filters: { CREDIT_LIMIT: 1 } });
    // A change makes its author the registrant: judged on their rights, the stored filters too.
    const annas = await suite.register(anna, { url, events: ["CUSTCreated"], filters: { CREDIT_LIMIT: 1 } });
    const taken = await as.anag3!.patch(`/api/v4/webhooks/${annas}`, { active: false });
    expect(taken.status).toBe(400);
    expect(taken.body).toMatchObject({ code: "INVALID_FIELD", field: "filters" });
    expect(taken.body.message).toContain("CREDIT_LIMIT");
    expect((await anna.get(`/api/v4/webhooks/${annas}`)).body.active).toBe(true);

    // A registrant whose peso later hides the filtered field: the registration fires no more.
    const control = await receiver();
    const mine = await receiver();
    await suite.register(anna, { url: control.url, events: ["CUSTCreated"] });
    const hook = await suite.register(as.anag2!, {
      url: mine.url,
      events: ["CUSTCreated"],
      filters: { CREDIT_LIMIT: 777 },
    });
    const before = await createCust({ CREDIT_LIMIT: 777 });
    const [got] = await received(mine, [before]);
    expect(got!.body.data.CREDIT_LIMIT).toBe(777);
    await setUser("anag2", "PESO", "3");
    try {
      const after = await createCust({ CREDIT_LIMIT: 777 });
      await received(control, [after]);
      expect((await deliveries(hook)).map((d) => d.OUTBOX_ID)).toEqual([before]);
    } finally {
      await setUser("anag2", "PESO", "2");
    }
  });

  /**
   * Three cities to a held receiver: the first is being sent, the second claimed ahead (held by
   * the worker), the third pending; `change` is made then, and the receiver answers.
   */
  async function claimedAhead(change: (hook: string) => Promise<void>) {
    const held = await heldReceiver();
    receivers.push(held.receiver);
    const hook = await suite.register(anna, {
      url: held.receiver.url,
      events: ["CITYCreated"],
      retry_count: 0,
      timeout_ms: 10_000,
    });
    const cities = [];
    for (let i = 0; i < 3; i++) cities.push((await suite.createCity(anna)).eventId);
    await held.receiver.waitFor(1);
    // All three queued, two of them claimed (one being sent, one held).
    await eventually(
      async () => {
        const rows = await deliveries(hook);
        return (
          rows.length === 3 && rows.filter((d) => d.STATUS === "pending" && d.ATTEMPTS === 1).length === 2
        );
      },
      { what: "three deliveries queued, two claimed" },
    );
    await change(hook);
    held.answerAll();
    return { hook, held: held.receiver, cities };
  }
  /** Waits until the registration's deliveries are in `statuses` (in any order). */
  const settled = (hook: string, statuses: string[]) =>
    eventually(
      async () => {
        const rows = await deliveries(hook);
        return (
          JSON.stringify(rows.map((d) => d.STATUS).sort()) === JSON.stringify([...statuses].sort()) && rows
        );
      },
      { what: `deliveries ${statuses.join(", ")}` },
    );

  it("a delivery claimed ahead is not sent once its webhook is deleted", async () => {
    try {
      const { hook, held, cities } = await claimedAhead(async (id) => {
        expect((await anna.delete(`/api/v4/webhooks/${id}`)).status).toBe(200);
      });
      await settled(hook, ["success", "cancelled", "cancelled"]);
      expect(eventIds(held)).toHaveLength(1);
      expect(cities).toContain(eventIds(held)[0]);
    } finally {
      for (const r of receivers.splice(0)) await r.close();
    }
  });

  it("a delivery claimed ahead is not sent once its webhook is deactivated", async () => {
    try {
      const { hook, held } = await claimedAhead(async (id) => {
        expect((await anna.patch(`/api/v4/webhooks/${id}`, { active: false })).status).toBe(200);
      });
      await settled(hook, ["success", "cancelled", "cancelled"]);
      // One was sent before (the first claimed); the others, never attempted, have no log row.
      expect(eventIds(held)).toHaveLength(1);
      const log = await deliveryLogWith(anna, hook, 1);
      expect(log.map((r) => [r.OUTBOX_ID, r.STATUS])).toEqual([[eventIds(held)[0], "success"]]);
    } finally {
      for (const r of receivers.splice(0)) await r.close();
    }
  });

  it("a delivery claimed ahead goes to the new URL with the new secret once they changed", async () => {
    const moved = await receiver();
    const secret = "the-new-secret-0123456789";
    try {
      const { hook, held, cities } = await claimedAhead(async (id) => {
        const res = await anna.patch(`/api/v4/webhooks/${id}`, { url: moved.url, secret });
        expect(res.status).toBe(200);
      });
      // The one being sent when the change was made went to the old URL; the others to the new.
      const others = cities.filter((id) => id !== eventIds(held)[0]);
      await received(moved, others);
      await settled(hook, ["success", "success", "success"]);
      expect(eventIds(held)).toHaveLength(1);
      expect(eventIds(moved).sort()).toEqual(others.sort());
      for (const q of moved.requests)
        expect(q.headers["x-service-signature"]).toBe(signatureOf(secret, q.raw));
    } finally {
      for (const r of receivers.splice(0)) await r.close();
    }
  });

  it("deactivated between retries: the log ends on failed, not on retrying", async () => {
    const failing = await suite.receiver(() => 500);
    const hook = await suite.register(anna, { url: failing.url, events: ["CITYCreated"], retry_count: 3 });
    const { eventId } = await suite.createCity(anna);
    await deliveryLogWith(anna, hook, 1, "retrying");
    // The next attempt is 2 × 500 ms after the first.
    expect((await anna.patch(`/api/v4/webhooks/${hook}`, { active: false })).status).toBe(200);
    const log = await deliveryLogWith(anna, hook, 1, "failed");
    expect(log.map((r) => [r.OUTBOX_ID, r.STATUS, r.ATTEMPT_COUNT, r.ERROR_MESSAGE])).toEqual([
      [eventId, "failed", 1, "not sent: the webhook was deactivated"],
      [eventId, "retrying", 1, "HTTP 500"],
    ]);
    expect(failing.requests).toHaveLength(1);
    expect((await deliveries(hook)).map((d) => [d.STATUS, d.ATTEMPTS])).toEqual([["cancelled", 1]]);
  });

  it("a NUL character (or an unpaired surrogate) in url, secret or filters is 400 naming the field, on POST and PATCH", async () => {
    const ok = { url: "https://hooks.example.com/nul", events: ["CITYCreated"], active: false };
    const cases: [Record<string, unknown>, string][] = [
      [{ url: "https://hooks.example.com/a\u0000b" }, "url"],
      [{ secret: "abcdefghijklmnop\u0000q" }, "secret"],
      [{ filters: { NAME: "a\u0000b" } }, "filters"],
      [{ filters: { "NA\u0000ME": "a" } }, "filters"],
      [{ filters: { NAME: "a\ud800b" } }, "filters"],
    ];
    const hook = await suite.register(anna, ok);
    for (const [change, field] of cases) {
      const posted = await anna.post("/api/v4/webhooks", { ...ok, ...change });
      expect(posted.status, JSON.stringify(change)).toBe(400);
      expect(posted.body).toMatchObject({ status: 400, code: "INVALID_FIELD", field });
      const patched = await anna.patch(`/api/v4/webhooks/${hook}`, change);
      expect(patched.status, JSON.stringify(change)).toBe(400);
      expect(patched.body).toMatchObject({ status: 400, code: "INVALID_FIELD", field });
    }
  });
});
