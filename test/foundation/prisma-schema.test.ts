// prisma/schema.prisma and prisma/migrations agree: after migrating, every model can be written
// and read back with every column through the Prisma client.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Prisma } from "../../src/generated/prisma/client.ts";
import type { Services } from "../../src/services.ts";
import { BACKENDS, createTestServices } from "../helpers/env.ts";

const T0 = new Date("2026-11-21T10:00:00.123Z");
const T1 = new Date("2026-11-22T11:30:00.456Z");

describe.each(BACKENDS)("Prisma models on %s", (backend) => {
  let services: Services;
  beforeAll(async () => {
    services = await createTestServices(backend);
  });
  afterAll(async () => {
    await services?.close();
  });

  it("every model of the schema is exercised here", () => {
    const models = Object.values(Prisma.ModelName).sort();
    expect(models).toEqual(
      [
        "TbDim",
        "TbVar",
        "TbCost",
        "TbObject",
        "TbMenu",
        "TbSort",
        "TbDocument",
        "TbMetaState",
        "TbTenant",
        "TbUser",
        "TbUserGrant",
        "TbLoginFailure",
        "TbSession",
        "TbRefreshToken",
        "TbOutbox",
        "TbWebhook",
        "TbWebhookLog",
        "TbSequence",
        "TbImportLedger",
        "TbEventConsumed",
        "TbWebhookDelivery",
        "TbEventStats",
        "TbSearch",
        "TbSearchFields",
        "TbHistory",
      ].sort(),
    );
  });

  it("TbDim", async () => {
    const data = {
      COD_DIM: "PX",
      DESC_DIM: "Prisma dim",
      TABLE_NAME: "TB_PX00",
      ID_FIELD: "PX_ID",
      CASCADE_DELETE: "A,B",
      INSERT_CASCADE: "C",
      UPDATE_CASCADE: "D",
      AUDIT_STYLE: "CREATED",
      INDEXES: "A,B;C,D",
      HISTORY: false,
      ROW_SCOPE: "centro_dett,owner",
    };
    await services.prisma.tbDim.create({ data });
    expect(await services.prisma.tbDim.findUnique({ where: { COD_DIM: "PX" } })).toEqual(data);
    const defaults = await services.prisma.tbDim.create({
      data: { COD_DIM: "PY", TABLE_NAME: "TB_PY00", ID_FIELD: "PY_ID" },
    });
    expect(defaults).toMatchObject({
      AUDIT_STYLE: "TREC",
      DESC_DIM: null,
      CASCADE_DELETE: null,
      INDEXES: null,
      HISTORY: true,
      ROW_SCOPE: null,
    });
  });

  it("TbVar", async () => {
    const data = {
      COD_DIM: "PX",
      COD_VAR: "AMOUNT",
      NUM_VAR: 3,
      DESC_VAR: "Amount",
      DATA_TYPE: "DECIMAL",
      LENGTH: 12,
      DECIMALS: 3,
      NULLABLE: false,
      TIPO_CAMPO: "AC",
      TIPO_VAR: "PY",
      INDEXED: true,
    };
    await services.prisma.tbVar.create({ data });
    expect(
      await services.prisma.tbVar.findUnique({
        where: { COD_DIM_COD_VAR: { COD_DIM: "PX", COD_VAR: "AMOUNT" } },
      }),
    ).toEqual(data);
    const d = await services.prisma.tbVar.create({
      data: { COD_DIM: "PX", COD_VAR: "B", NUM_VAR: 4, DATA_TYPE: "STRING" },
    });
    expect(d).toMatchObject({ NULLABLE: true, LENGTH: null, DECIMALS: null });
  });

  it("TbCost", async () => {
    const data = {
      COD_DIM: "PX",
      NUM_COST: 7,
      COD_VAR: "AMOUNT",
      COD_ON_OFF: "LDRNM",
      REQUIRED: true,
      RENDER_HINT: "money",
      GROUP_NAME: "finance",
      VALUE_TEMP: "{seq:PX:4}",
      COD_UTENTE: 2,
      CENTER_DETT: "nuovo",
      VALIDATION: { min: 0, max: 1000 },
    };
    await services.prisma.tbCost.create({ data });
    expect(
      await services.prisma.tbCost.findUnique({
        where: { COD_DIM_NUM_COST: { COD_DIM: "PX", NUM_COST: 7 } },
      }),
    ).toEqual(data);
    const d = await services.prisma.tbCost.create({ data: { COD_DIM: "PX", NUM_COST: 8, COD_VAR: "B" } });
    expect(d).toMatchObject({
      COD_ON_OFF: "",
      REQUIRED: false,
      CENTER_DETT: null,
      COD_UTENTE: null,
      VALIDATION: null,
    });
  });

  it("TbObject", async () => {
    const data = {
      COD_DIM: "PX",
      COD_VAR: "AMOUNT",
      COD_DIM_OBJ: "PY",
      COD_VAR_OBJ: "PY_ID",
      REL_NAME: "payer",
      COD_VAR_DESC: "NAME",
    };
    await services.prisma.tbObject.create({ data });
    expect(
      await services.prisma.tbObject.findUnique({
        where: { COD_DIM_COD_VAR: { COD_DIM: "PX", COD_VAR: "AMOUNT" } },
      }),
    ).toEqual(data);
  });

  it("TbMenu", async () => {
    const data = { COD_MENU: "px-1", NLEFT: 1, NRIGHT: 2, DESC_MENU: "Prisma", COD_DIM: "PX" };
    await services.prisma.tbMenu.create({ data });
    expect(await services.prisma.tbMenu.findUnique({ where: { COD_MENU: "px-1" } })).toEqual(data);
  });

  it("TbSort", async () => {
    const data = { COD_DIM: "PX", SORT_KEY: "by_amount", DESC_SORT: "By amount", SORT_EXPR: "-AMOUNT,B" };
    await services.prisma.tbSort.create({ data });
    expect(
      await services.prisma.tbSort.findUnique({
        where: { COD_DIM_SORT_KEY: { COD_DIM: "PX", SORT_KEY: "by_amount" } },
      }),
    ).toEqual(data);
  });

  it("TbDocument (JSON definition kept as given)", async () => {
    const data = {
      DOC_NAME: "pxdoc",
      COD_DIM: "PX",
      DEFINITION: { fields: ["PX_ID"], parts: [{ dim: "PY", join: { A: "B" }, n: 1.5, ok: true }] },
    };
    await services.prisma.tbDocument.create({ data });
    expect(await services.prisma.tbDocument.findUnique({ where: { DOC_NAME: "pxdoc" } })).toEqual(data);
  });

  it("TbMetaState (the migration seeds row 1 at version 1)", async () => {
    const seeded = await services.prisma.tbMetaState.findUnique({ where: { ID: 1 } });
    expect(seeded?.VERSION).toBeGreaterThanOrEqual(1n);
    const data = { ID: 2, VERSION: 9_007_199_254_740_993n, UPDATED_AT: T0 };
    await services.prisma.tbMetaState.create({ data });
    expect(await services.prisma.tbMetaState.findUnique({ where: { ID: 2 } })).toEqual(data);
    await services.prisma.tbMetaState.delete({ where: { ID: 2 } });
  });

  it("TbTenant, TbUser and TbUserGrant, with their relations", async () => {
    const tenant = {
      TENANT_ID: "px-tenant",
      DESC_TENANT: "Prisma tenant",
      CREATED_AT: T0,
      DATABASE: null,
      MOVING_SINCE: null,
    };
    await services.prisma.tbTenant.create({ data: tenant });
    expect(await services.prisma.tbTenant.findUnique({ where: { TENANT_ID: "px-tenant" } })).toEqual(tenant);

    const user = {
      USER_ID: "px-user",
      TENANT_ID: "px-tenant",
      PASSWORD_HASH: "scrypt$16384$8$1$c2FsdA==$a2V5",
      PESO: "2",
      CENTRO_DETT: "HQ",
      CENTRI: ["MI01", "RM01"],
      AMBIENTE: "test",
      LINGUA: "it",
      ACTIVE: false,
      FAILED_LOGINS: 3,
      LOCKED_UNTIL: T1,
      CREATED_AT: T0,
      UPDATED_AT: T1,
    };
    await services.prisma.tbUser.create({ data: user });
    const grant = {
      USER_ID: "px-user",
      COD_MENU: "px-1",
      OPERATIONS: ["read", "write", "force_delete", "all_rows"],
      LEVEL: 4,
      ROW_FILTER: "SALES_REP eq '{user}'",
    };
    await services.prisma.tbUserGrant.create({ data: grant });

    const back = await services.prisma.tbUser.findUnique({
      where: { USER_ID: "px-user" },
      include: { grants: true, tenant: true },
    });
    expect(back).toEqual({ ...user, grants: [grant], tenant });

    const minimal = await services.prisma.tbUser.create({
      data: { USER_ID: "px-min", TENANT_ID: "px-tenant", PASSWORD_HASH: "h" },
    });
    expect(minimal).toMatchObject({
      PESO: "3",
      ACTIVE: true,
      FAILED_LOGINS: 0,
      LOCKED_UNTIL: null,
      CENTRI: [],
    });
    const g = await services.prisma.tbUserGrant.create({ data: { USER_ID: "px-min", COD_MENU: "x" } });
    expect(g).toEqual({ USER_ID: "px-min", COD_MENU: "x", OPERATIONS: [], LEVEL: 1, ROW_FILTER: null });

    // Deleting a user removes its grants (ON DELETE CASCADE in both schema and migration).
    await services.prisma.tbUser.delete({ where: { USER_ID: "px-min" } });
    expect(await services.prisma.tbUserGrant.count({ where: { USER_ID: "px-min" } })).toBe(0);
    // A user of a missing tenant is refused by the foreign key.
    await expect(
      services.prisma.tbUser.create({ data: { USER_ID: "px-bad", TENANT_ID: "nope", PASSWORD_HASH: "h" } }),
    ).rejects.toThrow();
  });

  it("TbSession (TB_ANAG_SESSIONS00)", async () => {
    const data = {
      SESSION_ID: "6f1c2f0e-5b7a-4d0e-9a51-1f6f3c1d2e3f",
      USER_ID: "px-user",
      TENANT_ID: "px-tenant",
      GRANTS: [{ COD_MENU: "px-1", NLEFT: 1, NRIGHT: 2, OPERATIONS: ["read"] }],
      DB_CONNECTIONS: { "px-1": { schema: "public" } },
      INTERFACE_DATA: { menus: ["px-1"], boxes: [] },
      CONTEXT: { source: "px-1", peso: "2", ambiente: "test", centro_dett: "HQ", lingua: "it" },
      CREATED_AT: T0,
      EXPIRES_AT: T1,
      LAST_ACTIVITY: T0,
    };
    await services.prisma.tbSession.create({ data });
    expect(await services.prisma.tbSession.findUnique({ where: { SESSION_ID: data.SESSION_ID } })).toEqual(
      data,
    );
  });

  it("TbRefreshToken", async () => {
    const data = {
      TOKEN_HASH: "a".repeat(64),
      SESSION_ID: "6f1c2f0e-5b7a-4d0e-9a51-1f6f3c1d2e3f",
      USER_ID: "px-user",
      CREATED_AT: T0,
      EXPIRES_AT: T1,
      USED_AT: T1,
    };
    await services.prisma.tbRefreshToken.create({ data });
    expect(
      await services.prisma.tbRefreshToken.findUnique({ where: { TOKEN_HASH: data.TOKEN_HASH } }),
    ).toEqual(data);
  });

  it("TbLoginFailure (per user and client address, removed with the user)", async () => {
    const data = {
      USER_ID: "px-user",
      CLIENT_KEY: "2001:db8:1:2::/64",
      FAILURES: 3,
      LOCKED_UNTIL: T1,
      LAST_FAILURE: T0,
    };
    await services.prisma.tbLoginFailure.create({ data });
    const key = { USER_ID_CLIENT_KEY: { USER_ID: "px-user", CLIENT_KEY: data.CLIENT_KEY } };
    expect(await services.prisma.tbLoginFailure.findUnique({ where: key })).toEqual(data);
    const minimal = await services.prisma.tbLoginFailure.create({
      data: { USER_ID: "px-user", CLIENT_KEY: "192.0.2.1" },
    });
    expect(minimal).toMatchObject({ FAILURES: 0, LOCKED_UNTIL: null });
    await services.prisma.tbUser.create({
      data: { USER_ID: "px-gone", TENANT_ID: "px-tenant", PASSWORD_HASH: "h" },
    });
    await services.prisma.tbLoginFailure.create({ data: { USER_ID: "px-gone", CLIENT_KEY: "192.0.2.1" } });
    await services.prisma.tbUser.delete({ where: { USER_ID: "px-gone" } });
    expect(await services.prisma.tbLoginFailure.count({ where: { USER_ID: "px-gone" } })).toBe(0);
  });

  it("TbOutbox (TB_ANAG_OUTBOX00, OUTBOX_ID generated)", async () => {
    const data = {
      EVENT_TYPE: "PXCreated",
      AGGREGATE_TYPE: "PX",
      AGGREGATE_ID: "42",
      PAYLOAD: { PX_ID: 42, AMOUNT: 1.5, NAME: "x" },
      TENANT_ID: "px-tenant",
      CREATED_AT: T0,
      PUBLISHED_AT: T1,
      PREVIOUS: { AMOUNT: 1 },
    };
    const created = await services.prisma.tbOutbox.create({ data });
    expect(typeof created.OUTBOX_ID).toBe("bigint");
    const second = await services.prisma.tbOutbox.create({ data: { ...data, PUBLISHED_AT: null } });
    expect(second.OUTBOX_ID).toBeGreaterThan(created.OUTBOX_ID);
    expect(await services.prisma.tbOutbox.findUnique({ where: { OUTBOX_ID: created.OUTBOX_ID } })).toEqual({
      ...data,
      OUTBOX_ID: created.OUTBOX_ID,
    });
  });

  it("TbWebhook and TbWebhookLog", async () => {
    const hook = {
      SOURCE: "px-tenant",
      URL: "https://hooks.example/px",
      EVENTS: ["PXCreated", "PXUpdated"],
      DIMENSIONS: ["PX"],
      FILTERS: { STATUS: "O" },
      SECRET: "s3cret",
      ACTIVE: "N",
      RETRY_COUNT: 5,
      TIMEOUT_MS: 1500,
      CREATED_BY: "px-user",
      CREATED_AT: T0,
      UPDATED_AT: T1,
    };
    const created = await services.prisma.tbWebhook.create({ data: hook });
    expect(await services.prisma.tbWebhook.findUnique({ where: { WEBHOOK_ID: created.WEBHOOK_ID } })).toEqual(
      {
        ...hook,
        WEBHOOK_ID: created.WEBHOOK_ID,
      },
    );
    const minimal = await services.prisma.tbWebhook.create({
      data: { SOURCE: "px-tenant", URL: "https://hooks.example/2", EVENTS: [] },
    });
    expect(minimal).toMatchObject({
      ACTIVE: "Y",
      RETRY_COUNT: 3,
      TIMEOUT_MS: 5000,
      SECRET: null,
      DIMENSIONS: null,
      CREATED_BY: null,
    });

    const log = {
      WEBHOOK_ID: created.WEBHOOK_ID,
      OUTBOX_ID: 9_007_199_254_740_993n,
      STATUS: "retrying",
      HTTP_STATUS: 503,
      ERROR_MESSAGE: "Service Unavailable",
      ATTEMPT_COUNT: 2,
      CREATED_AT: T0,
    };
    const l = await services.prisma.tbWebhookLog.create({ data: log });
    expect(await services.prisma.tbWebhookLog.findUnique({ where: { LOG_ID: l.LOG_ID } })).toEqual({
      ...log,
      LOG_ID: l.LOG_ID,
    });
    const lm = await services.prisma.tbWebhookLog.create({
      data: { WEBHOOK_ID: created.WEBHOOK_ID, OUTBOX_ID: 1n, STATUS: "success" },
    });
    expect(lm).toMatchObject({ ATTEMPT_COUNT: 1, HTTP_STATUS: null });
  });

  it("TbEventConsumed", async () => {
    const data = { SUBSCRIBER: "analytics", OUTBOX_ID: 7n, CONSUMED_AT: T0 };
    await services.prisma.tbEventConsumed.create({ data });
    expect(
      await services.prisma.tbEventConsumed.findUnique({
        where: { SUBSCRIBER_OUTBOX_ID: { SUBSCRIBER: "analytics", OUTBOX_ID: 7n } },
      }),
    ).toEqual(data);
  });

  it("TbWebhookDelivery", async () => {
    const data = {
      WEBHOOK_ID: 1,
      OUTBOX_ID: 9n,
      EVENT_TYPE: "PXCreated",
      BODY: '{"event_id":"9"}',
      STATUS: "failed",
      ATTEMPTS: 4,
      NEXT_AT: T0,
      CREATED_AT: T1,
    };
    const d = await services.prisma.tbWebhookDelivery.create({ data });
    expect(
      await services.prisma.tbWebhookDelivery.findUnique({ where: { DELIVERY_ID: d.DELIVERY_ID } }),
    ).toEqual({
      ...data,
      DELIVERY_ID: d.DELIVERY_ID,
    });
    const defaults = await services.prisma.tbWebhookDelivery.create({
      data: { WEBHOOK_ID: 1, OUTBOX_ID: 10n, EVENT_TYPE: "PXCreated", BODY: "{}" },
    });
    expect(defaults).toMatchObject({ STATUS: "pending", ATTEMPTS: 0 });
  });

  it("TbEventStats", async () => {
    const data = {
      TENANT_ID: "px-tenant",
      DIMENSION: "PX",
      EVENT_TYPE: "PXCreated",
      DAY: new Date("2026-11-21T00:00:00Z"),
      COUNT: 3n,
    };
    await services.prisma.tbEventStats.create({ data });
    expect(await services.prisma.tbEventStats.findMany({ where: { TENANT_ID: "px-tenant" } })).toEqual([
      data,
    ]);
  });

  it("TbSearch", async () => {
    const data = {
      TENANT_ID: "px-tenant",
      DIMENSION: "PX",
      RECORD_ID: "42",
      TEXT: "Rossi Milano",
      OUTBOX_ID: 5n,
      UPDATED_AT: T0,
    };
    await services.prisma.tbSearch.create({ data });
    expect(await services.prisma.tbSearch.findMany({ where: { TENANT_ID: "px-tenant" } })).toEqual([data]);
  });

  it("TbSearchFields", async () => {
    const data = { DIMENSION: "PX", FIELDS: "NAME,CITY", UPDATED_AT: T0 };
    await services.prisma.tbSearchFields.create({ data });
    expect(await services.prisma.tbSearchFields.findUnique({ where: { DIMENSION: "PX" } })).toEqual(data);
  });

  it("TbHistory", async () => {
    const data = {
      TENANT_ID: "px-tenant",
      DIMENSION: "PX",
      RECORD_ID: "42",
      REVISION: 3,
      CHANGED_AT: T0,
      USER_ID: "px-user",
      OPERATION: "update",
      CHANGES: { NAME: { before: "A", after: "B" } },
    };
    await services.prisma.tbHistory.create({ data });
    expect(await services.prisma.tbHistory.findMany({ where: { TENANT_ID: "px-tenant" } })).toEqual([data]);
  });

  it("TbSequence", async () => {
    const data = { TENANT_ID: "px-tenant", SEQ_NAME: "PX", VALUE: 12n };
    await services.prisma.tbSequence.create({ data });
    expect(
      await services.prisma.tbSequence.findUnique({
        where: { TENANT_ID_SEQ_NAME: { TENANT_ID: "px-tenant", SEQ_NAME: "PX" } },
      }),
    ).toEqual(data);
    const d = await services.prisma.tbSequence.create({ data: { TENANT_ID: "px-tenant", SEQ_NAME: "PY" } });
    expect(d.VALUE).toBe(0n);
  });

  it("TbImportLedger", async () => {
    const data = {
      FINGERPRINT: "f".repeat(64),
      COD_DIM: "PX",
      TENANT_ID: "px-tenant",
      RECORD_ID: "42",
      CREATED_AT: T0,
    };
    await services.prisma.tbImportLedger.create({ data });
    expect(
      await services.prisma.tbImportLedger.findUnique({ where: { FINGERPRINT: data.FINGERPRINT } }),
    ).toEqual(data);
    // RECORD_ID holds a STRING id of any length (migration 0002_wide_record_ids).
    const long = { ...data, FINGERPRINT: "e".repeat(64), RECORD_ID: "r".repeat(300) };
    await services.prisma.tbImportLedger.create({ data: long });
    expect(
      (await services.prisma.tbImportLedger.findUnique({ where: { FINGERPRINT: long.FINGERPRINT } }))!
        .RECORD_ID,
    ).toBe(long.RECORD_ID);
  });

  it("TbOutbox AGGREGATE_ID holds a record id of any length", async () => {
    const created = await services.prisma.tbOutbox.create({
      data: {
        EVENT_TYPE: "PXCreated",
        AGGREGATE_TYPE: "PX",
        AGGREGATE_ID: "a".repeat(300),
        PAYLOAD: {},
        TENANT_ID: "px-tenant",
      },
    });
    expect(created.AGGREGATE_ID).toHaveLength(300);
  });

  it("every table of the migrations has a model, and every model a table", async () => {
    const schema = await readFile(path.resolve("prisma/schema.prisma"), "utf8");
    const mapped = [...schema.matchAll(/@@map\("([^"]+)"\)/g)].map((m) => m[1]);
    const res = await services.db.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables
        WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`,
    );
    const tables = res.rows.map((r) => r.table_name).filter((t) => t !== "_dimensio_migrations");
    expect(tables.sort()).toEqual(mapped.sort());
    expect(mapped).toContain("TB_ANAG_OUTBOX00");
  });
});
