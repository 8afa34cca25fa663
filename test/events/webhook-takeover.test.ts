// A registration taken over: another administrator's PATCH makes them its registrant
// (decisions.md §17), and the deliveries already queued follow: their bodies are made again for
// the new registrant (fields they may not read leave them; an event they may not see is
// cancelled), a delivery the worker claimed ahead for the earlier registrant is handed back and
// sent with the new body, and the dispatcher queues nothing made for the earlier registrant once
// the change has committed. Real HTTP receivers on loopback.
import { createHmac } from "node:crypto";
import { beforeAll, describe, expect, it } from "vitest";
import { NOT_SEEN_BY_NEW_REGISTRANT } from "../../src/events/webhooks/takeover.ts";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS } from "../helpers/env.ts";
import { type Client, client } from "../write/http.ts";
import { eventually, webhookReceiver } from "./support.ts";
import {
  deliveryLogWith,
  sampleWithMasterDataAdmins,
  webhookSuite,
  deliveryRows,
  receivedEvents,
} from "./webhook-setup.ts";

const signatureOf = (secret: string, raw: string) =>
  `sha256=${createHmac("sha256", secret).update(raw).digest("hex")}`;

describe.each(BACKENDS)("a webhook taken over by another administrator (%s)", (backend) => {
  const suite = webhookSuite(backend, {
    users: ["anna"],
    allowPrivate: true,
    fixture: sampleWithMasterDataAdmins(),
    // One attempt at a time per registration: the worker holds one more, claimed ahead.
    env: { WEBHOOK_RETRY_BASE_MS: "500", WEBHOOK_CONCURRENCY_PER_RECEIVER: "1" },
  });
  const { anna } = suite.clients;
  const as: Record<string, Client> = {};

  beforeAll(async () => {
    for (const name of ["anag2", "anag3"])
      as[name] = client(suite.app.t.app, await loginAs(suite.app.t.app, name, `${name}-secret-1`));
  });

  const db = () => suite.app.t.services.db;
  const deliveries = (webhookId: string) => deliveryRows(db(), webhookId);
  const received = receivedEvents;
  let customers = 0;
  const createCust = async () => {
    const res = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: `Taken customer ${++customers}`, CREDIT_LIMIT: 4321, EMAIL: "t@example.com" },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    return res.body.event_id as string;
  };

  it("a delivery queued while the receiver failed goes out with the body made for the new registrant", async () => {
    const failing = await suite.receiver(() => 500);
    const working = await suite.receiver();
    const secret = "taken-over-secret-0123";
    const hook = await suite.register(anna, {
      url: failing.url,
      events: ["CUSTCreated"],
      retry_count: 3,
      secret,
    });
    const id = await createCust();
    await deliveryLogWith(anna, hook, 1, "retrying");
    // Made for anna (peso 1), it carries CREDIT_LIMIT.
    expect(failing.requests[0]!.body.data.CREDIT_LIMIT).toBe(4321);

    // anag3 (peso 3, who does not see CREDIT_LIMIT) takes it over and points it elsewhere.
    const res = await as.anag3!.patch(`/api/v4/webhooks/${hook}`, { url: working.url });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const [pending] = await deliveries(hook);
    expect(pending!.STATUS).toBe("pending");
    expect(JSON.parse(pending!.BODY).data).not.toHaveProperty("CREDIT_LIMIT");

    const [got] = await received(working, [id]);
    expect(got!.body).toMatchObject({ event_id: id, data: { EMAIL: "t@example.com" } });
    expect(got!.body.data).not.toHaveProperty("CREDIT_LIMIT");
    expect(got!.headers["x-service-signature"]).toBe(signatureOf(secret, got!.raw));
    await deliveryLogWith(anna, hook, 1, "success");
  });

  it("a delivery claimed ahead for the earlier registrant is handed back and sent with the new body", async () => {
    // Requests wait until answered: the first one is being sent, the second claimed ahead.
    let open = false;
    const gates: Array<() => void> = [];
    const held = await webhookReceiver(
      () =>
        new Promise<number>((resolve) => {
          if (open) resolve(200);
          else gates.push(() => resolve(200));
        }),
    );
    try {
      const hook = await suite.register(anna, {
        url: held.url,
        events: ["CUSTCreated"],
        retry_count: 0,
        timeout_ms: 10_000,
      });
      const ids = [await createCust(), await createCust(), await createCust()];
      await held.waitFor(1);
      await eventually(
        async () => {
          const { rows } = await db().query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "TB_WEBHOOK_DELIVERY"
              WHERE "WEBHOOK_ID" = $1 AND "STATUS" = 'pending' AND "ATTEMPTS" = 1`,
            [Number(hook)],
          );
          return rows[0]!.n === 2;
        },
        { what: "two deliveries claimed" },
      );
      // The same URL: only the registrant changes.
      const res = await as.anag3!.patch(`/api/v4/webhooks/${hook}`, { timeout_ms: 9_000 });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      open = true;
      for (const g of gates.splice(0)) g();

      const requests = await received(held, ids);
      expect(requests).toHaveLength(3);
      // The one being sent when the change was made went out as it was; the others were made again.
      const [first, ...others] = requests;
      expect(first!.body.data.CREDIT_LIMIT).toBe(4321);
      for (const q of others) {
        expect(q.body.data).not.toHaveProperty("CREDIT_LIMIT");
        expect(q.body.data).toMatchObject({ EMAIL: "t@example.com" });
      }
      await deliveryLogWith(anna, hook, 3, "success");
    } finally {
      await held.close();
    }
  });

  it("a delivery of an event the new registrant may not see is cancelled; its log ends on failed", async () => {
    const failing = await suite.receiver(() => 500);
    const hook = await suite.register(anna, { url: failing.url, events: ["PRODCreated"], retry_count: 3 });
    const created = await anna.post("/api/v4/core/PROD?source=catalog-1", {
      data: { NAME: "Taken product", UNIT_PRICE: 3 },
    });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    await deliveryLogWith(anna, hook, 1, "retrying");
    // anag2 reads the master data only, not the catalog.
    const res = await as.anag2!.patch(`/api/v4/webhooks/${hook}`, { retry_count: 3 });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await deliveries(hook)).map((d) => [d.OUTBOX_ID, d.STATUS])).toEqual([
      [created.body.event_id, "cancelled"],
    ]);
    const log = await deliveryLogWith(anna, hook, 1, "failed");
    expect(log[0]).toMatchObject({
      OUTBOX_ID: created.body.event_id,
      STATUS: "failed",
      ERROR_MESSAGE: NOT_SEEN_BY_NEW_REGISTRANT,
    });
  });

  if (backend === "postgres") {
    it("an event being queued while the registration changes registrant is queued with the new registrant's body", async () => {
      const got = await suite.receiver();
      const hook = await suite.register(anna, { url: got.url, events: ["CUSTCreated"] });
      let id = "";
      // The change of registrant holds the registration's row until it commits; meanwhile the
      // dispatcher, which matched the event against the registration as it was, waits for it.
      await db().transaction(async (tx) => {
        await tx.query(`UPDATE "TB_WEBHOOK" SET "CREATED_BY" = 'anag3' WHERE "WEBHOOK_ID" = $1`, [
          Number(hook),
        ]);
        id = await createCust();
        await eventually(
          async () => {
            const { rows } = await db().query<{ n: number }>(
              `SELECT count(*)::int AS n FROM pg_stat_activity
                WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO "TB_WEBHOOK_DELIVERY"%'`,
            );
            return rows[0]!.n > 0;
          },
          { what: "the dispatcher waiting for the registration" },
        );
      });
      const [delivered] = await received(got, [id]);
      expect(delivered!.body.data).not.toHaveProperty("CREDIT_LIMIT");
      expect(delivered!.body.data).toMatchObject({ EMAIL: "t@example.com" });
    });
  }
});
