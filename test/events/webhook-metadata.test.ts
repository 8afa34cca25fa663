// Metadata events on webhooks: their names (`<table code>Created`…, DIM, VAR, COST, OBJECT, MENU,
// SORT, DOCUMENT) may be named in `events` and `dimensions` like a dimension's, with the same
// validation, and filtered on their row's columns. Metadata is shared by every tenant: a change
// reaches every tenant's registrations that ask for it, as far as the registrant may read the
// row through the metadata endpoints (its dimension, and a field's row only of a field their
// peso shows). Real HTTP receivers on loopback.
import { beforeAll, describe, expect, it } from "vitest";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS } from "../helpers/env.ts";
import { type Client, client } from "../write/http.ts";
import { eventually } from "./support.ts";
import { type Receiver, sampleWithMasterDataAdmins, webhookSuite } from "./webhook-setup.ts";

describe.each(BACKENDS)("webhooks on metadata events (%s)", (backend) => {
  const suite = webhookSuite(backend, {
    users: ["anna", "greta"],
    allowPrivate: true,
    fixture: sampleWithMasterDataAdmins(),
  });
  const { anna, greta } = suite.clients;
  const as: Record<string, Client> = {};

  beforeAll(async () => {
    for (const name of ["anag2", "anag3"])
      as[name] = client(suite.app.t.app, await loginAs(suite.app.t.app, name, `${name}-secret-1`));
  });

  /** The registration's deliveries' event ids. */
  const delivered = async (webhookId: string) => {
    const { rows } = await suite.app.t.services.db.query<{ OUTBOX_ID: string }>(
      `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID" FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" = $1 ORDER BY "OUTBOX_ID"`,
      [Number(webhookId)],
    );
    return rows.map((r) => r.OUTBOX_ID);
  };
  /** Waits until `r` got the event `id`; its request. */
  const receivedEvent = (r: Receiver, id: string) =>
    eventually(() => r.requests.find((q) => q.body.event_id === id), { what: `event ${id}` });
  /** A metadata change by anna (platform administrator of acme): its event id. */
  const change = async (path: string, data: Record<string, unknown>) => {
    const res = await anna.patch(`/api/v4/core/${path}?source=erp`, { data });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.event_id as string;
  };

  it("metadata event names and tables are accepted in events and dimensions; names that could never fire are 400", async () => {
    const url = "https://hooks.example.com/meta";
    const tables = ["DIM", "VAR", "COST", "OBJECT", "MENU", "SORT", "DOCUMENT"];
    const events = tables.flatMap((t) => [`${t}Created`, `${t}Updated`, `${t}Deleted`]);
    const id = await suite.register(anna, { url, events, dimensions: tables });
    const read = await anna.get(`/api/v4/webhooks/${id}`);
    expect(read.body).toMatchObject({ events, dimensions: tables });
    // Filters on a metadata row's columns; a record event and a metadata event side by side.
    await suite.register(anna, {
      url,
      events: ["VARUpdated", "CUSTCreated"],
      filters: { COD_DIM: "CUST" },
    });
    const patched = await anna.patch(`/api/v4/webhooks/${id}`, {
      events: ["DIMDeleted"],
      dimensions: ["DIM"],
      filters: { COD_DIM: "CITY" },
    });
    expect(patched.status, JSON.stringify(patched.body)).toBe(200);
    expect(patched.body).toMatchObject({ events: ["DIMDeleted"], filters: { COD_DIM: "CITY" } });

    const refused: [Record<string, unknown>, string, string][] = [
      [{ events: ["FOOUpdated"] }, "events", "FOOUpdated"],
      [{ events: ["DIMChanged"] }, "events", "DIMChanged"],
      [{ events: ["*"], dimensions: ["FOO"] }, "dimensions", "FOO"],
      // Only VAR events, only DIM events let through: it would never fire.
      [{ events: ["VARUpdated"], dimensions: ["DIM"] }, "dimensions", "DIM"],
      // TB_DIM has no COD_VAR column; no table nor dimension has NOPE.
      [{ events: ["DIMUpdated"], filters: { COD_VAR: "NAME" } }, "filters", "COD_VAR"],
      [{ events: ["*"], filters: { NOPE: 1 } }, "filters", "NOPE"],
    ];
    for (const [body, field, named] of refused) {
      const res = await anna.post("/api/v4/webhooks", { url, ...body });
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body).toMatchObject({ status: 400, code: "INVALID_FIELD", field });
      expect(res.body.message).toContain(named);
    }
  });

  it("a metadata change reaches every tenant's registrations that ask for it, as far as the registrant may read the row", async () => {
    const control = await suite.receiver();
    const otherTenant = await suite.receiver();
    const masterData = await suite.receiver();
    const peso3 = await suite.receiver();
    await suite.register(anna, { url: control.url, events: ["DIMUpdated", "COSTUpdated"] });
    // greta is globex's administrator: metadata is globex's too.
    const globex = await suite.register(greta, {
      url: otherTenant.url,
      events: ["DIMUpdated"],
      filters: { COD_DIM: "CITY" },
    });
    // anag2 reads the master data (CUST, ADDR, CITY), not the catalog (PROD).
    const anag2 = await suite.register(as.anag2!, { url: masterData.url, events: ["DIMUpdated"] });
    // anag3 (peso 3) does not see CUST.CREDIT_LIMIT (weighted 2).
    const anag3 = await suite.register(as.anag3!, { url: peso3.url, events: ["COSTUpdated"] });
    try {
      const prod = await change("DIM/PROD", { DESC_DIM: "Products (hooked)" });
      const city = await change("DIM/CITY", { DESC_DIM: "Cities (hooked)" });
      const hidden = await change("COST/CUST/6", { GROUP_NAME: "finance (hooked)" });
      const shown = await change("COST/CUST/3", { GROUP_NAME: "main (hooked)" });

      const got = await receivedEvent(control, city);
      expect(got.body).toMatchObject({
        event_type: "DIMUpdated",
        dimension: "DIM",
        record_id: "CITY",
        data: { COD_DIM: "CITY", DESC_DIM: "Cities (hooked)" },
      });
      const cityElsewhere = await receivedEvent(otherTenant, city);
      expect(cityElsewhere.raw).toBe(got.raw);
      await receivedEvent(masterData, city);
      const cost = await receivedEvent(peso3, shown);
      expect(cost.body).toMatchObject({
        event_type: "COSTUpdated",
        dimension: "COST",
        record_id: "CUST/3",
        data: { COD_DIM: "CUST", COD_VAR: "NAME", GROUP_NAME: "main (hooked)" },
      });
      for (const id of [prod, hidden]) await receivedEvent(control, id);

      // Each event's deliveries are written together: what is not there by now never will be.
      expect(await delivered(globex)).toEqual([city]);
      expect(await delivered(anag2)).toEqual([city]);
      expect(await delivered(anag3)).toEqual([shown]);
    } finally {
      await change("DIM/PROD", { DESC_DIM: "Products" });
      await change("DIM/CITY", { DESC_DIM: "Cities" });
      await change("COST/CUST/6", { GROUP_NAME: "finance" });
      await change("COST/CUST/3", { GROUP_NAME: "main" });
    }
  });
});
