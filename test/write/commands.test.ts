// Commands (decisions.md §15, issue 12): the built-ins through the write pipeline and the state
// machine, a command registered in code with its input schema, unknown commands, and GraphQL's
// D_command.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { updateOne } from "../../src/resolvers/write/operations.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { type Client, client, clientFor, NO_RATE_LIMITS } from "./http.ts";

describe.each(BACKENDS)("commands (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let lucia: Client;
  let annaToken: string;
  let n = 0;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    annaToken = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    anna = client(t.app, annaToken);
    lucia = await clientFor(t.app, "lucia");
  });
  afterAll(async () => {
    await t?.close();
  });

  const city = async () => {
    const id = `CM${++n}`;
    const res = await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: id, NAME: `Cmd ${id}`, COUNTRY: "IT" },
    });
    expect(res.status).toBe(201);
    return id;
  };
  const command = (c: Client, name: string, body: unknown, dim = "CITY", source = "anag-3") =>
    c.post(`/api/v4/core/${dim}/command/${name}?source=${source}`, body);

  it("process, complete and restore move TREC through the write pipeline, each with its event", async () => {
    const id = await city();
    const processed = await command(anna, "process", { id, data: { NAME: "In work" } });
    expect(processed.status).toBe(200);
    expect(processed.body).toMatchObject({
      data: { CITY_ID: id, TREC: "P", NAME: "In work" },
      event_id: expect.any(String),
    });
    const again = await command(anna, "process", { id });
    expect(again.status).toBe(400);
    expect(again.body).toMatchObject({ code: "INVALID_STATE_TRANSITION", field: "TREC" });
    const completed = await command(anna, "complete", { id });
    expect(completed.body.data.TREC).toBe("M");
    expect((await command(anna, "complete", { id })).body.code).toBe("INVALID_STATE_TRANSITION");
    expect((await command(anna, "restore", { id })).body.code).toBe("INVALID_STATE_TRANSITION");
    expect((await anna.delete(`/api/v4/core/CITY/${id}?source=anag-3`)).body.data.TREC).toBe("C");
    const restored = await command(anna, "restore", { id });
    expect(restored.body.data.TREC).toBe("M");
    const { rows } = await t.services.db.query<{ EVENT_TYPE: string }>(
      `SELECT "EVENT_TYPE" FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_ID" = $1 ORDER BY "OUTBOX_ID"`,
      [id],
    );
    expect(rows.map((r) => r.EVENT_TYPE)).toEqual([
      "CITYCreated",
      "CITYUpdated",
      "CITYUpdated",
      "CITYDeleted",
      "CITYUpdated",
    ]);
    expect(String(restored.body.event_id)).toBe(
      String(
        (
          await t.services.db.query<{ m: string }>(
            `SELECT max("OUTBOX_ID")::text AS m FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_ID" = $1`,
            [id],
          )
        ).rows[0]!.m,
      ),
    );
  });

  it("a TREC in a command's data naming another state is 400, not overridden; its own state passes", async () => {
    const id = await city();
    const res = await command(anna, "process", { id, data: { TREC: "C" } });
    expect(res.status).toBe(400);
    expect(res.body).toEqual({
      error: "ValidationError",
      code: "INVALID_STATE_TRANSITION",
      status: 400,
      field: "TREC",
      message:
        'The process command moves the record to P; its data names TREC "C". Leave TREC out of a command\'s data (PATCH the record to move it otherwise).',
      details: { command: "process", to: "P" },
    });
    const [{ TREC }] = (
      await t.services.db.query<{ TREC: string }>(
        `SELECT "TREC" FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = $1`,
        [id],
      )
    ).rows as [{ TREC: string }];
    expect(TREC).toBe("N");
    expect((await command(anna, "process", { id, data: { TREC: "P" } })).body.data.TREC).toBe("P");
  });

  it("unknown commands are 404 COMMAND_NOT_FOUND; a missing id is 400; grants apply", async () => {
    const id = await city();
    const unknown = await command(anna, "teleport", { id });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({
      code: "COMMAND_NOT_FOUND",
      details: { commands: ["complete", "process", "restore"] },
    });
    expect((await command(anna, "process", {})).body).toMatchObject({ status: 400, field: "id" });
    expect((await command(anna, "process", { id: "NOPE" })).status).toBe(404);
    // An id that is no id at all (an object, a list) is the client's mistake, not a missing record.
    for (const bad of [{ a: 1 }, [id], true]) {
      const res = await command(anna, "process", { id: bad });
      expect(res.status, JSON.stringify(bad)).toBe(400);
      expect(res.body).toMatchObject({ code: "INVALID_PARAMETER", field: "id" });
    }
    // As for every write: the source's grant for the dimension first (403), like PATCH /NODIM/{id}.
    expect((await command(anna, "process", { id }, "NODIM")).status).toBe(
      (await anna.patch(`/api/v4/core/NODIM/${id}?source=anag-3`, { data: {} })).status,
    );
    // lucia reads customers but may not write them.
    const cust = await anna.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Cmd customer" } });
    const refused = await command(lucia, "process", { id: cust.body.data.CUST_ID }, "CUST", "anag-1");
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("INSUFFICIENT_PERMISSIONS");
  });

  it("a command registered in code, with its input schema", async () => {
    t.services.commands.register("CITY", {
      name: "shout",
      description: "Upper-cases the name given.",
      input: z.strictObject({ NAME: z.string().min(1).max(60) }),
      run: ({ deps, request, dim, id, data }) =>
        updateOne(deps, request, dim, id, { NAME: data.NAME.toUpperCase() }, "patch"),
    });
    const id = await city();
    const res = await command(anna, "shout", { id, data: { NAME: "quiet town" } });
    expect(res.status).toBe(200);
    expect(res.body.data.NAME).toBe("QUIET TOWN");
    const bad = await command(anna, "shout", { id, data: { NAME: 7 } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field: "NAME" });
    // Registered for CITY only.
    expect((await command(anna, "shout", { id: 1, data: { NAME: "x" } }, "CUST", "anag-1")).status).toBe(404);
  });

  it("GraphQL: D_command runs the same commands", async () => {
    const id = await city();
    const gql = graphqlClient(t.app, annaToken);
    const res = await gql(
      `mutation($id: ID!) { CITY_command(source: "anag-3", name: "process", id: $id) { data { CITY_ID TREC } message event_id } }`,
      { id },
    );
    expect(res.body.data.CITY_command).toMatchObject({
      data: { CITY_ID: id, TREC: "P" },
      event_id: expect.any(String),
    });
    const refused = await gql(
      `mutation { CITY_command(source: "anag-3", name: "process", id: "${id}") { event_id } }`,
    );
    expect(refused.body.errors[0].extensions).toMatchObject({
      code: "INVALID_STATE_TRANSITION",
      status: 400,
    });
    const unknown = await gql(
      `mutation { CITY_command(source: "anag-3", name: "nope", id: "${id}") { event_id } }`,
    );
    expect(unknown.body.errors[0].extensions).toMatchObject({ code: "COMMAND_NOT_FOUND", status: 404 });
  });
});
