// The bodies of the REST writes (explore restops findings 4 and 6): a member a route does not read
// is 400 INVALID_REQUEST naming it and the members the route takes, nothing written (a command
// body with a mistyped `data` moved its record without the values); a PATCH that changes nothing
// is 400 and writes nothing (it moved N → M and emitted an event); a required text field holding
// only whitespace is missing, as "" is.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { lastOutboxId, row, snapshot } from "./helpers.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "./http.ts";

const CITY = "/api/v4/core/CITY";
const Q = "?source=anag-3";

describe.each(BACKENDS)("write bodies (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let n = 0;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    await t?.close();
  });

  const newCity = async () => {
    const id = `WB${++n}`;
    const res = await anna.post(`${CITY}${Q}`, { data: { CITY_ID: id, NAME: `Body ${id}`, COUNTRY: "IT" } });
    expect(res.status).toBe(201);
    return id;
  };
  const refusal = (member: string, where: string, takes: string, hint = "") => ({
    error: "BadRequest",
    code: "INVALID_REQUEST",
    status: 400,
    field: member,
    message: `${member} is not a member of ${where}, which takes ${takes}; it would not be read.${hint}`,
  });

  it("every write route refuses a body member it does not read, naming it and what it takes; nothing is written", async () => {
    const id = await newCity();
    const other = await newCity();
    const cases: Array<[string, () => ReturnType<Client["post"]>, ReturnType<typeof refusal>]> = [
      [
        "command with a mistyped data",
        () => anna.post(`${CITY}/command/process${Q}`, { id, fields: { NAME: "Lost" } }),
        refusal("fields", "a command body", "id, data, source, center_dett"),
      ],
      [
        "create",
        () => anna.post(`${CITY}${Q}`, { data: { CITY_ID: "WBX", NAME: "X", COUNTRY: "IT" }, extra: 1 }),
        refusal("extra", "a create body", "data, source, center_dett"),
      ],
      [
        "PATCH with force",
        () => anna.patch(`${CITY}/${id}${Q}`, { data: { NAME: "Forced" }, force: true }),
        refusal("force", "a PATCH body", "data, source, center_dett"),
      ],
      [
        "PUT",
        () => anna.put(`${CITY}/${id}${Q}`, { data: { NAME: "Put", COUNTRY: "IT" }, dat: {} }),
        refusal("dat", "a PUT body", "data, source, center_dett"),
      ],
      [
        "batch create asking atomic",
        () =>
          anna.post(`${CITY}/batch${Q}`, {
            data: [{ CITY_ID: "WBY", NAME: "Y", COUNTRY: "IT" }],
            atomic: true,
          }),
        refusal("atomic", "a batch create body", "data, source, center_dett"),
      ],
      [
        "batch update",
        () => anna.patch(`${CITY}/batch${Q}`, { data: [{ id, NAME: "Batch" }], atomic: true }),
        refusal("atomic", "a batch update body", "data, source, center_dett"),
      ],
      [
        "batch-delete",
        () => anna.post(`${CITY}/batch-delete${Q}`, { ids: [other], cascade: true }),
        refusal("cascade", "a batch-delete body", "ids, force, source, center_dett"),
      ],
      [
        "DELETE with force in its body",
        () => anna.delete(`${CITY}/${id}${Q}`, { force: true }),
        refusal(
          "force",
          "a DELETE body",
          "source, center_dett",
          " A DELETE's force goes in its query string (?force=true, spec 4.3), not in its body.",
        ),
      ],
      [
        "revision restore",
        () => anna.post(`${CITY}/${id}/history/1/restore${Q}`, { data: { NAME: "Old" } }),
        refusal("data", "a revision restore's body", "source, center_dett"),
      ],
      [
        "metadata create",
        () =>
          anna.post("/api/v4/core/COST?source=erp", {
            data: { COD_DIM: "CITY", COD_VAR: "NAME", CENTRO_DETT: "HQ" },
            extra: 1,
          }),
        refusal("extra", "a POST body of COST", "data, fields, source, center_dett"),
      ],
      [
        "metadata delete",
        () => anna.delete("/api/v4/core/SORT/CITY/none?source=erp", { force: true }),
        refusal(
          "force",
          "a DELETE body of SORT",
          "source, center_dett",
          " A DELETE's force goes in its query string (?force=true, spec 4.3), not in its body.",
        ),
      ],
      [
        "multi-dimension batch asking non-atomic",
        () =>
          anna.post(`/api/v4/core/batch${Q}`, {
            operations: [{ method: "PATCH", dim: "CITY", id, data: { NAME: "Core" } }],
            atomic: false,
          }),
        refusal("atomic", "a batch's body", "operations, source, center_dett"),
      ],
    ];
    const before = await snapshot(t.services);
    for (const [what, send, expected] of cases) {
      const res = await send();
      expect(res.status, what).toBe(400);
      expect(res.body, what).toEqual(expected);
    }
    expect(await snapshot(t.services)).toEqual(before);
    expect(await row(t.services, "TB_ANAG_CITY00", "CITY_ID", id)).toMatchObject({
      TREC: "N",
      NAME: `Body ${id}`,
    });
  });

  it("the members each route takes still work: data, id, ids, force and the scope in the body", async () => {
    const id = await newCity();
    const other = await newCity();
    const patched = await anna.patch(`${CITY}/${id}`, { data: { NAME: "Scoped" }, source: "anag-3" });
    expect(patched.status).toBe(200);
    expect(patched.body.data.NAME).toBe("Scoped");
    const processed = await anna.post(`${CITY}/command/process`, {
      id,
      data: { NAME: "In work" },
      source: "anag-3",
    });
    expect(processed.status).toBe(200);
    expect(processed.body.data).toMatchObject({ TREC: "P", NAME: "In work" });
    const created = await anna.post(`${CITY}/batch`, {
      data: [{ CITY_ID: `WB${++n}`, NAME: "Batch", COUNTRY: "IT" }],
      source: "anag-3",
    });
    expect(created.body).toMatchObject({ success: 1, failed: 0 });
    const deleted = await anna.post(`${CITY}/batch-delete${Q}`, { ids: [other], force: false });
    expect(deleted.body).toMatchObject({ success: 1, failed: 0 });
    expect(await row(t.services, "TB_ANAG_CITY00", "CITY_ID", other)).toMatchObject({ TREC: "C" });
    const removed = await anna.delete(`${CITY}/${other}?force=true`, { source: "anag-3", center_dett: "HQ" });
    expect(removed.status).toBe(200);
    expect(await row(t.services, "TB_ANAG_CITY00", "CITY_ID", other)).toBeUndefined();
  });

  it("a PATCH that changes nothing is 400 and writes nothing: no TREC move, no audit stamp, no event", async () => {
    const id = await newCity();
    const before = await row(t.services, "TB_ANAG_CITY00", "CITY_ID", id);
    const outbox = await lastOutboxId(t.services);
    const empty = await anna.patch(`${CITY}/${id}${Q}`, { data: {} });
    expect(empty.status).toBe(400);
    expect(empty.body).toEqual({
      error: "BadRequest",
      code: "INVALID_REQUEST",
      status: 400,
      field: "data",
      message: "A PATCH of CITY must change at least one field; its data names none, so nothing was written.",
    });
    // The record's own id, which an update body may repeat, changes nothing either.
    const idOnly = await anna.patch(`${CITY}/${id}${Q}`, { data: { CITY_ID: id } });
    expect(idOnly.status).toBe(400);
    expect(idOnly.body.message).toBe(
      "A PATCH of CITY must change at least one field; its data names only the record's id, so nothing was written.",
    );
    // A batch item that changes nothing fails alone; the others are written.
    const other = await newCity();
    const batch = await anna.patch(`${CITY}/batch${Q}`, { data: [{ id }, { id: other, NAME: "Changed" }] });
    expect(batch.body).toMatchObject({
      success: 1,
      failed: 1,
      results: [
        { index: 0, status: "failed", error: { code: "INVALID_REQUEST", field: "data" } },
        { index: 1, status: "updated" },
      ],
    });
    expect(await row(t.services, "TB_ANAG_CITY00", "CITY_ID", id)).toEqual(before);
    const { rows } = await t.services.db.query(
      `SELECT 1 FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" > $1 AND "AGGREGATE_ID" = $2`,
      [outbox, id],
    );
    expect(rows).toEqual([]);
    // A PATCH with a change is a write as before.
    const changed = await anna.patch(`${CITY}/${id}${Q}`, { data: { NAME: "Renamed" } });
    expect(changed.status).toBe(200);
    expect(changed.body.data).toMatchObject({ TREC: "M", NAME: "Renamed" });
  });

  it("a required text field holding only whitespace is missing (422), as an empty one is", async () => {
    const blank = await anna.post(`${CITY}${Q}`, { data: { CITY_ID: "WBSP", NAME: " \t ", COUNTRY: "IT" } });
    expect(blank.status).toBe(422);
    expect(blank.body).toMatchObject({ code: "REQUIRED_FIELD_MISSING", field: "NAME" });
    expect(await row(t.services, "TB_ANAG_CITY00", "CITY_ID", "WBSP")).toBeUndefined();
    const id = await newCity();
    const patched = await anna.patch(`${CITY}/${id}${Q}`, { data: { NAME: "   " } });
    expect(patched.status).toBe(422);
    expect(patched.body).toMatchObject({ code: "REQUIRED_FIELD_MISSING", field: "NAME" });
    expect(await row(t.services, "TB_ANAG_CITY00", "CITY_ID", id)).toMatchObject({ NAME: `Body ${id}` });
    // Text around the spaces is a value (stored as sent); an optional field may hold spaces.
    const padded = await anna.patch(`${CITY}/${id}${Q}`, { data: { NAME: "  Padded  " } });
    expect(padded.status).toBe(200);
    expect(padded.body.data.NAME).toBe("  Padded  ");
    const cust = await anna.post("/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Spaces", NOTES: "   " },
    });
    expect(cust.status).toBe(201);
  });
});
