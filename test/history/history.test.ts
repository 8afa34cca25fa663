// Record history (decisions.md §19, issue 39 §1): a revision per create, update, delete, state
// change, command and restore, in the write's transaction, changed fields only; what the history
// shows a caller (D flag, peso); REST GET …/history and POST …/history/{revision}/restore; GraphQL
// {DIM}_history and {DIM}_restore_revision; TB_DIM.HISTORY; the retention clean-up.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { revisionChanges } from "../../src/history/revisions.ts";
import { importFixture } from "../../src/fixtures/import.ts";
import { pruneHistoryBatch, startHistoryRetention } from "../../src/history/retention.ts";
import { createLogger } from "../../src/logger.ts";
import { updateOne } from "../../src/resolvers/write/operations.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { expectInvalidParameter } from "../helpers/error-body.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { contextFor } from "../write/helpers.ts";
import { type Client, client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

interface RevisionRow {
  REVISION: number;
  OPERATION: string;
  USER_ID: string;
  CHANGES: Record<string, { before: unknown; after: unknown }>;
}

describe.each(BACKENDS)("record history (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let marco: Client;
  let lucia: Client;
  let annaToken: string;
  let n = 0;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    annaToken = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    anna = client(t.app, annaToken);
    marco = await clientFor(t.app, "marco");
    lucia = await clientFor(t.app, "lucia");
  });
  afterAll(async () => {
    await t?.close();
  });

  const revisions = async (dim: string, id: string | number) =>
    (
      await t.services.db.query<RevisionRow>(
        `SELECT "REVISION", "OPERATION", "USER_ID", "CHANGES" FROM "TB_HISTORY"
          WHERE "TENANT_ID" = 'acme' AND "DIMENSION" = $1 AND "RECORD_ID" = $2 ORDER BY "REVISION"`,
        [dim, String(id)],
      )
    ).rows.map((r) => ({
      ...r,
      REVISION: Number(r.REVISION),
      // As every reader takes them (a create's written in SQL are kept compact: revisionChanges).
      CHANGES: revisionChanges(r.CHANGES),
    }));

  const city = async (c: Client = anna) => {
    const id = `HC${++n}`;
    const res = await c.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: id, NAME: `History ${id}`, COUNTRY: "IT" },
    });
    expect(res.status).toBe(201);
    return id;
  };

  it("writes one revision per create, update, state change, command, delete and restore", async () => {
    const id = await city();
    const base = `/api/v4/core/CITY/${id}`;
    expect((await anna.patch(`${base}?source=anag-3`, { data: { NAME: "Renamed" } })).status).toBe(200);
    expect((await anna.patch(`${base}?source=anag-3`, { data: { TREC: "P" } })).status).toBe(200);
    const done = await anna.post("/api/v4/core/CITY/command/complete?source=anag-3", { id });
    expect(done.status).toBe(200);
    expect((await anna.delete(`${base}?source=anag-3`)).status).toBe(200);
    expect((await anna.post("/api/v4/core/CITY/command/restore?source=anag-3", { id })).status).toBe(200);
    const restored = await anna.post(`${base}/history/1/restore?source=anag-3`);
    expect(restored.status).toBe(200);
    expect(restored.body).toMatchObject({
      data: { CITY_ID: id, NAME: `History ${id}`, TREC: "M" },
      message: `CITY ${id} restored to revision 1.`,
      event_id: expect.any(String),
    });

    const rows = await revisions("CITY", id);
    expect(rows.map((r) => [r.REVISION, r.OPERATION, r.USER_ID])).toEqual([
      [1, "create", "anna"],
      [2, "update", "anna"],
      [3, "state", "anna"],
      [4, "command", "anna"],
      [5, "delete", "anna"],
      [6, "command", "anna"],
      [7, "restore", "anna"],
    ]);
    // Changed fields only, before and after; the audit fields other than TREC are the revision's own.
    expect(rows[0]!.CHANGES).toEqual({
      CITY_ID: { before: null, after: id },
      NAME: { before: null, after: `History ${id}` },
      COUNTRY: { before: null, after: "IT" },
      TREC: { before: null, after: "N" },
    });
    expect(rows[1]!.CHANGES).toEqual({
      NAME: { before: `History ${id}`, after: "Renamed" },
      TREC: { before: "N", after: "M" },
    });
    expect(rows[2]!.CHANGES).toEqual({ TREC: { before: "M", after: "P" } });
    expect(rows[3]!.CHANGES).toEqual({ TREC: { before: "P", after: "M" } });
    expect(rows[4]!.CHANGES).toEqual({ TREC: { before: "M", after: "C" } });
    expect(rows[5]!.CHANGES).toEqual({ TREC: { before: "C", after: "M" } });
    expect(rows[6]!.CHANGES).toEqual({ NAME: { before: "Renamed", after: `History ${id}` } });
    // The restore is an update like any: its event went to the outbox.
    const { rows: events } = await t.services.db.query<{ EVENT_TYPE: string }>(
      `SELECT "EVENT_TYPE" FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_ID" = $1 ORDER BY "OUTBOX_ID" DESC LIMIT 1`,
      [id],
    );
    expect(events[0]!.EVENT_TYPE).toBe("CITYUpdated");
  });

  it("a create with children (INSERT_CASCADE) writes a revision per record, and a soft delete's cascade too", async () => {
    const res = await anna.post("/api/v4/core/ORD?source=sales-1", {
      data: { CUST_ID: 1, ORDL: [{ PROD_ID: "P0001", QTY: 2, PRICE: 10 }] },
    });
    expect(res.status).toBe(201);
    const ordId = res.body.data.ORD_ID as number;
    const lineId = res.body.data.ORDL[0].ORDL_ID as number;
    expect((await revisions("ORD", ordId)).map((r) => r.OPERATION)).toEqual(["create"]);
    const line = await revisions("ORDL", lineId);
    expect(line.map((r) => r.OPERATION)).toEqual(["create"]);
    expect(line[0]!.CHANGES.ORD_ID).toEqual({ before: null, after: ordId });
    expect((await anna.delete(`/api/v4/core/ORD/${ordId}?source=sales-1`)).status).toBe(200);
    expect((await revisions("ORDL", lineId)).map((r) => [r.OPERATION, r.CHANGES.TREC])).toEqual([
      ["create", { before: null, after: "N" }],
      ["delete", { before: "N", after: "C" }],
    ]);
  });

  it("a write that fails or is rolled back leaves no revision", async () => {
    const id = await city();
    // Refused by the pipeline (400): nothing written.
    const refused = await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, {
      data: { NAME: "x".repeat(500) },
    });
    expect(refused.status).toBe(400);
    // Failed at the last step before COMMIT, after the revision was sent: rolled back with the rest.
    const failing = updateOne(
      t.services,
      contextFor("anna", "anag-3"),
      "CITY",
      id,
      { NAME: "Never" },
      "patch",
      {
        onStep(step) {
          if (step === "commit") throw new Error("injected at commit");
        },
      },
    );
    await expect(failing).rejects.toThrow("injected at commit");
    expect((await revisions("CITY", id)).map((r) => r.OPERATION)).toEqual(["create"]);
  });

  it("creates sent together (the group commit on PostgreSQL) each get their own revision and user", async () => {
    const ids = Array.from({ length: 12 }, () => `HG${++n}`);
    const replies = await Promise.all(
      ids.map((id, i) =>
        (i % 2 ? marco : anna).post("/api/v4/core/CITY?source=anag-3", {
          data: { CITY_ID: id, NAME: `Group ${id}`, COUNTRY: "IT" },
        }),
      ),
    );
    expect(replies.map((r) => r.status)).toEqual(ids.map(() => 201));
    for (const [i, id] of ids.entries()) {
      const rows = await revisions("CITY", id);
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({
        REVISION: 1,
        OPERATION: "create",
        USER_ID: i % 2 ? "marco" : "anna",
        CHANGES: { CITY_ID: { before: null, after: id }, NAME: { before: null, after: `Group ${id}` } },
      });
    }
  });

  it("GET …/history lists revisions newest first with paging; errors are standard bodies", async () => {
    const id = await city();
    for (const name of ["A", "B", "C"])
      expect(
        (await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, { data: { NAME: name } })).status,
      ).toBe(200);
    const all = await anna.get(`/api/v4/core/CITY/${id}/history?source=anag-3`);
    expect(all.status).toBe(200);
    expect(all.body.data.map((r: { revision: number }) => r.revision)).toEqual([4, 3, 2, 1]);
    expect(all.body.meta).toEqual({ total: 4, num_rows: 100, offset: 0, has_more: false });
    expect(all.body.data[0]).toEqual({
      revision: 4,
      at: expect.stringMatching(/^\d{14}$/),
      user: "anna",
      operation: "update",
      changes: { NAME: { before: "B", after: "C" } },
    });
    const page = await anna.get(`/api/v4/core/CITY/${id}/history?source=anag-3&$num_rows=2&$offset=1`);
    expect(page.body.data.map((r: { revision: number }) => r.revision)).toEqual([3, 2]);
    expect(page.body.meta).toEqual({ total: 4, num_rows: 2, offset: 1, has_more: true });
    const past = await anna.get(`/api/v4/core/CITY/${id}/history?source=anag-3&$offset=10`);
    expect(past.body.meta).toEqual({ total: 4, num_rows: 100, offset: 10, has_more: false });

    const bad = await anna.get(`/api/v4/core/CITY/${id}/history?source=anag-3&$num_rows=x`);
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: "INVALID_PARAMETER", field: "$num_rows" });
    const unknown = await anna.get("/api/v4/core/CITY/NOPE/history?source=anag-3");
    expect(unknown.status).toBe(404);
    expect(unknown.body.code).toBe("RECORD_NOT_FOUND");
    // Another tenant's record is not there for greta.
    const greta = await clientFor(t.app, "greta");
    expect((await greta.get(`/api/v4/core/CITY/${id}/history?source=anag-3`)).status).toBe(404);
    // The read grant is needed (lucia has none on anag-3).
    const refused = await lucia.get(`/api/v4/core/CITY/${id}/history?source=anag-3`);
    expect(refused.status).toBe(403);
  });

  it("GET …/history refuses a parameter it does not take (400 INVALID_PARAMETER naming it), never leaves it unread", async () => {
    const id = await city();
    const base = `/api/v4/core/CITY/${id}/history?source=anag-3`;
    for (const param of [
      "filter[operation]=create",
      "filter[NAME][$like]=x",
      "sort=revision",
      "$order=revision%20asc",
      "$filter=operation%20eq%20'create'",
      "$fields=NAME",
      "cond_trec=C",
      "debug=true",
      "sort[]=revision",
      "$unknown=1",
      "operation=create",
    ]) {
      const res = await anna.get(`${base}&${param}`);
      const name = decodeURIComponent(param.slice(0, param.indexOf("=")));
      expectInvalidParameter(
        res,
        {
          field: name,
          message: `${name} is not taken by a record's history, which takes only $num_rows and $offset (besides source and the context parameters center_dett, ambiente, modulo, microservice): it lists every revision, newest first.`,
        },
        param,
      );
    }
    // What it takes still works, the context parameters included.
    const ok = await anna.get(`${base}&$num_rows=1&$offset=0&center_dett=dettaglio`);
    expect(ok.status).toBe(200);
    expect(ok.body.meta).toEqual({ total: 1, num_rows: 1, offset: 0, has_more: false });
  });

  it("history shows only the fields the caller may read in detail (D) at its peso", async () => {
    await importFixture(t.services, {
      TB_DIM: [],
      TB_VAR: [],
      records: {
        CUST: [
          {
            tenant_id: "acme",
            data: {
              CODE: "HIST-1",
              NAME: "Hidden",
              CITY_ID: "MI",
              CREDIT_LIMIT: 10,
              RISK_SCORE: 7,
              INTERNAL: "x",
            },
          },
        ],
      },
    });
    const { rows } = await t.services.db.query<{ CUST_ID: number }>(
      `SELECT "CUST_ID" FROM "TB_ANAG_CUST00" WHERE "CODE" = 'HIST-1'`,
    );
    const id = rows[0]!.CUST_ID;
    const stored = (await revisions("CUST", id))[0]!;
    expect(Object.keys(stored.CHANGES)).toEqual(
      expect.arrayContaining(["NAME", "CREDIT_LIMIT", "RISK_SCORE", "INTERNAL"]),
    );
    // anna (peso 1): CREDIT_LIMIT (COD_UTENTE 2) yes; RISK_SCORE (no D) and INTERNAL (no flags) no.
    const forAnna = await anna.get(`/api/v4/core/CUST/${id}/history?source=anag-1`);
    expect(forAnna.status).toBe(200);
    const annaSees = Object.keys(forAnna.body.data[0].changes);
    expect(annaSees).toEqual(expect.arrayContaining(["CUST_ID", "NAME", "CREDIT_LIMIT", "TREC"]));
    expect(annaSees).not.toContain("RISK_SCORE");
    expect(annaSees).not.toContain("INTERNAL");
    // lucia (peso 3): CREDIT_LIMIT is hidden by peso too.
    const forLucia = await lucia.get(`/api/v4/core/CUST/${id}/history?source=anag-1`);
    expect(forLucia.status).toBe(200);
    const luciaSees = Object.keys(forLucia.body.data[0].changes);
    expect(luciaSees).toContain("NAME");
    expect(luciaSees).not.toContain("CREDIT_LIMIT");
    expect(luciaSees).not.toContain("RISK_SCORE");
    // A restore writes back only what the caller sees and may modify: RISK_SCORE stays as it is.
    expect(
      (await anna.patch(`/api/v4/core/CUST/${id}?source=anag-1`, { data: { NAME: "Changed" } })).status,
    ).toBe(200);
    const restored = await anna.post(`/api/v4/core/CUST/${id}/history/1/restore?source=anag-1`);
    expect(restored.status).toBe(200);
    expect(restored.body.data.NAME).toBe("Hidden");
    expect((await revisions("CUST", id)).at(-1)).toMatchObject({
      OPERATION: "restore",
      CHANGES: { NAME: { before: "Changed", after: "Hidden" } },
    });
  });

  it("restore: 404 for an unknown revision or record, 400 for a bad revision, 403 without write, 400 on a cancelled record", async () => {
    const id = await city();
    const base = `/api/v4/core/CITY/${id}/history`;
    const missing = await anna.post(`${base}/9/restore?source=anag-3`);
    expect(missing.status).toBe(404);
    expect(missing.body).toMatchObject({ code: "REVISION_NOT_FOUND" });
    for (const bad of ["0", "x", "-1", "1.5", "99999999999"]) {
      const res = await anna.post(`${base}/${bad}/restore?source=anag-3`);
      expect(res.status, bad).toBe(400);
      expect(res.body).toMatchObject({ code: "INVALID_PARAMETER", field: "revision" });
    }
    // A revision is written as the history lists it: no leading zero, sign or space (01 is no
    // revision 1), and nothing is restored.
    for (const bad of ["01", "001", "00", "+1", "%201", "1%20", "0x1", "1e0"]) {
      const res = await anna.post(`${base}/${bad}/restore?source=anag-3`);
      expectInvalidParameter(
        res,
        {
          field: "revision",
          message: `revision must be a whole number from 1 to 2147483647, written without leading zeros, sign or spaces (as the history lists it); got '${decodeURIComponent(bad)}'.`,
        },
        bad,
      );
    }
    expect((await revisions("CITY", id)).map((r) => r.OPERATION)).toEqual(["create"]);
    const noRecord = await anna.post("/api/v4/core/CITY/NOPE/history/1/restore?source=anag-3");
    expect(noRecord.status).toBe(404);
    expect(noRecord.body.code).toBe("RECORD_NOT_FOUND");
    // lucia reads CUST only: no write grant.
    const cust = await lucia.post("/api/v4/core/CUST/1/history/1/restore?source=anag-1");
    expect(cust.status).toBe(403);
    // A cancelled record is restored first (the restore command); its revisions after that.
    expect((await anna.delete(`/api/v4/core/CITY/${id}?source=anag-3`)).status).toBe(200);
    const cancelled = await anna.post(`${base}/1/restore?source=anag-3`);
    expect(cancelled.status).toBe(400);
    expect(cancelled.body.code).toBe("INVALID_STATE_TRANSITION");
    expect((await revisions("CITY", id)).map((r) => r.OPERATION)).toEqual(["create", "delete"]);
  });

  it("a force delete removes the record's history", async () => {
    const id = await city();
    expect(
      (await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, { data: { NAME: "Gone" } })).status,
    ).toBe(200);
    expect(await revisions("CITY", id)).toHaveLength(2);
    expect((await anna.delete(`/api/v4/core/CITY/${id}?source=anag-3&force=true`)).status).toBe(200);
    expect(await revisions("CITY", id)).toEqual([]);
    expect((await anna.get(`/api/v4/core/CITY/${id}/history?source=anag-3`)).status).toBe(404);
  });

  it("GraphQL: {DIM}_history pages by keyset cursor too (first/after, meta.end_cursor), bound to its record", async () => {
    const gql = graphqlClient(t.app, annaToken);
    const id = await city();
    for (const name of ["K1", "K2", "K3"])
      await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, { data: { NAME: name } });
    const page = (after: string | null, recordId = id) =>
      gql(
        `query($id: ID!, $after: String) { CITY_history(source: "anag-3", id: $id, first: 2, after: $after) {
           data { revision } meta { has_more end_cursor total } } }`,
        { id: recordId, after },
      );
    const first = await page(null);
    expect(first.body.errors).toBeUndefined();
    expect(first.body.data.CITY_history.data.map((r: { revision: number }) => r.revision)).toEqual([4, 3]);
    expect(first.body.data.CITY_history.meta).toMatchObject({ has_more: true, total: 4 });
    const cursor = first.body.data.CITY_history.meta.end_cursor as string;
    // A revision written meanwhile does not move the walk: the next page follows revision 3.
    await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, { data: { NAME: "K4" } });
    const second = await page(cursor);
    expect(second.body.data.CITY_history.data.map((r: { revision: number }) => r.revision)).toEqual([2, 1]);
    expect(second.body.data.CITY_history.meta).toMatchObject({ has_more: false, total: 5 });
    // Another record's history does not take it; nor do first with limit, after with offset.
    const other = await city();
    const foreign = await page(cursor, other);
    expect(foreign.body.errors[0].extensions).toMatchObject({ code: "INVALID_CURSOR" });
    const mixed = await gql(
      `query($id: ID!) { CITY_history(source: "anag-3", id: $id, first: 2, limit: 2) { data { revision } } }`,
      { id },
    );
    expect(mixed.body.errors[0].extensions).toMatchObject({ code: "INVALID_PARAMETER", field: "first" });
  });

  it("GraphQL: {DIM}_history and {DIM}_restore_revision", async () => {
    const gql = graphqlClient(t.app, annaToken);
    const id = await city();
    await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, { data: { NAME: "Via REST" } });
    const read = await gql(
      `query($id: ID!) { CITY_history(source: "anag-3", id: $id, limit: 1) {
         data { revision user operation changes at } meta { total has_more num_rows offset } } }`,
      { id },
    );
    expect(read.body.errors).toBeUndefined();
    expect(read.body.data.CITY_history).toEqual({
      data: [
        {
          revision: 2,
          user: "anna",
          operation: "update",
          changes: {
            NAME: { before: `History ${id}`, after: "Via REST" },
            TREC: { before: "N", after: "M" },
          },
          at: expect.stringMatching(/^\d{14}$/),
        },
      ],
      meta: { total: 2, has_more: true, num_rows: 1, offset: 0 },
    });
    const restore = await gql(
      `mutation($id: ID!) { CITY_restore_revision(source: "anag-3", id: $id, revision: 1) { data { NAME } message event_id } }`,
      { id },
    );
    expect(restore.body.errors).toBeUndefined();
    expect(restore.body.data.CITY_restore_revision).toMatchObject({
      data: { NAME: `History ${id}` },
      event_id: expect.any(String),
    });
    const missing = await gql(
      `mutation($id: ID!) { CITY_restore_revision(source: "anag-3", id: $id, revision: 99) { message } }`,
      { id },
    );
    expect(missing.body.errors[0].extensions.code).toBe("REVISION_NOT_FOUND");
    const badLimit = await gql(
      `query($id: ID!) { CITY_history(source: "anag-3", id: $id, limit: -1) { meta { total } } }`,
      { id },
    );
    expect(badLimit.body.errors[0].extensions.code).toBe("INVALID_PARAMETER");
    // revision is an Int: GraphQL's own grammar refuses 01 and "01", before any resolver runs.
    const leadingZero = await gql(
      `mutation($id: ID!) { CITY_restore_revision(source: "anag-3", id: $id, revision: 01) { message } }`,
      { id },
    );
    expect(leadingZero.body.data ?? null).toBeNull();
    expect(leadingZero.body.errors[0].extensions).toMatchObject({ code: "GRAPHQL_PARSE_FAILED" });
    const asText = await gql(
      `mutation($id: ID!, $r: Int!) { CITY_restore_revision(source: "anag-3", id: $id, revision: $r) { message } }`,
      { id, r: "01" },
    );
    expect(asText.body.data ?? null).toBeNull();
    expect(asText.body.errors[0].message).toContain("Int cannot represent");
    const zero = await gql(
      `mutation($id: ID!) { CITY_restore_revision(source: "anag-3", id: $id, revision: 0) { message } }`,
      { id },
    );
    expect(zero.body.errors[0].extensions).toMatchObject({
      code: "INVALID_PARAMETER",
      status: 400,
      field: "revision",
    });
    expect((await revisions("CITY", id)).map((r) => r.OPERATION)).toEqual(["create", "update", "restore"]);
  });

  it("the OpenAPI document describes the history and restore paths", async () => {
    const doc = await anna.get("/api/v4/openapi.json?source=anag-3");
    expect(doc.status).toBe(200);
    expect(doc.body.paths["/api/v4/core/CITY/{id}/history"].get.operationId).toBe("history_CITY");
    expect(doc.body.paths["/api/v4/core/CITY/{id}/history/{revision}/restore"].post.operationId).toBe(
      "restore_revision_CITY",
    );
  });

  it("TB_DIM.HISTORY false writes no revisions for that dimension", async () => {
    const off = await anna.patch("/api/v4/core/DIM/LST?source=erp", { data: { HISTORY: false } });
    expect(off.status).toBe(200);
    expect(off.body.data.HISTORY).toBe(false);
    const res = await anna.post("/api/v4/core/LST?source=catalog-2", {
      data: { COD_LST: "HOFF", DESC_LST: "Off" },
    });
    expect(res.status).toBe(201);
    await anna.patch("/api/v4/core/LST/HOFF?source=catalog-2", { data: { DESC_LST: "Still off" } });
    expect(await revisions("LST", "HOFF")).toEqual([]);
    const listed = await anna.get("/api/v4/core/LST/HOFF/history?source=catalog-2");
    expect(listed.status).toBe(200);
    expect(listed.body.data).toEqual([]);
  });

  it("the retention clean-up deletes revisions past HISTORY_RETENTION_DAYS, keeping new ones and each record's latest", async () => {
    const id = await city();
    for (const name of ["One", "Two"])
      await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, { data: { NAME: name } });
    const recent = await city();
    // Revisions 1 and 2 of `id` made 400 days old; 3 is new. All of `stale`'s revisions are old.
    await t.services.db.query(
      `UPDATE "TB_HISTORY" SET "CHANGED_AT" = now() - interval '400 days'
        WHERE "DIMENSION" = 'CITY' AND "RECORD_ID" = $1 AND "REVISION" < 3`,
      [id],
    );
    const stale = await city();
    await anna.patch(`/api/v4/core/CITY/${stale}?source=anag-3`, { data: { NAME: "Old" } });
    await t.services.db.query(
      `UPDATE "TB_HISTORY" SET "CHANGED_AT" = now() - interval '400 days' WHERE "DIMENSION" = 'CITY' AND "RECORD_ID" = $1`,
      [stale],
    );
    expect(await pruneHistoryBatch(t.services.db, 0)).toBe(0);
    const job = startHistoryRetention({
      db: t.services.db,
      logger: createLogger("silent"),
      retentionDays: 365,
      intervalMs: 0,
      batchSize: 1,
    });
    // Batches of one: the round goes on until a batch finds nothing more.
    expect(await job.runOnce()).toBe(3);
    await job.stop();
    expect((await revisions("CITY", id)).map((r) => r.REVISION)).toEqual([3]);
    expect((await revisions("CITY", recent)).map((r) => r.REVISION)).toEqual([1]);
    // The record's latest revision stays, whatever its age: numbering goes on from it.
    expect((await revisions("CITY", stale)).map((r) => r.REVISION)).toEqual([2]);
    await anna.patch(`/api/v4/core/CITY/${stale}?source=anag-3`, { data: { NAME: "New" } });
    expect((await revisions("CITY", stale)).map((r) => r.REVISION)).toEqual([2, 3]);
  });

  // PostgreSQL: a write and the clean-up on two connections at once (PGlite has one).
  (backend === "postgres" ? it : () => {})(
    "the clean-up and writes of the same record never wait for each other",
    async () => {
      const id = await city();
      for (const name of ["One", "Two", "Three"])
        await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, { data: { NAME: name } });
      const age = () =>
        t.services.db.query(
          `UPDATE "TB_HISTORY" SET "CHANGED_AT" = now() - interval '400 days'
            WHERE "DIMENSION" = 'CITY' AND "RECORD_ID" = $1 AND "REVISION" < 3`,
          [id],
        );
      await age();
      // A clean-up whose transaction is still open (its row locks held): a write of the record goes
      // through meanwhile (were it to wait, the clean-up's transaction would never end).
      await t.services.db.transaction(async (tx) => {
        // Its two, and any earlier test left old.
        expect(await pruneHistoryBatch(tx, 365)).toBeGreaterThanOrEqual(2);
        const res = await anna.patch(`/api/v4/core/CITY/${id}?source=anag-3`, { data: { NAME: "Four" } });
        expect(res.status).toBe(200);
      });
      expect((await revisions("CITY", id)).map((r) => r.REVISION)).toEqual([3, 4, 5]);
      await t.services.db.query(
        `UPDATE "TB_HISTORY" SET "CHANGED_AT" = now() - interval '400 days'
          WHERE "DIMENSION" = 'CITY' AND "RECORD_ID" = $1 AND "REVISION" < 5`,
        [id],
      );
      // A write of the record at its last step before COMMIT (its row locked): the clean-up runs.
      let pruned = -1;
      await updateOne(t.services, contextFor("anna", "anag-3"), "CITY", id, { NAME: "Five" }, "patch", {
        async onStep(step) {
          if (step === "commit") pruned = await pruneHistoryBatch(t.services.db, 365);
        },
      });
      expect(pruned).toBe(2);
      expect((await revisions("CITY", id)).map((r) => r.REVISION)).toEqual([5, 6]);
    },
  );
});
