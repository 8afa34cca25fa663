// A revision's restore on a cancelled record (TREC C) is refused as before (400
// INVALID_STATE_TRANSITION, field TREC), with a message that says what to do: restore the record
// first with the `restore` command, named as REST and GraphQL call it, then its revision. Before,
// it answered an update's message, "a cancelled record can only be restored, by PATCH with TREC
// M", which reads as if this restore were not one.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { type Client, client, NO_RATE_LIMITS } from "../write/http.ts";

describe.each(BACKENDS)("restoring a revision of a cancelled record (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let gql: ReturnType<typeof graphqlClient>;
  let n = 0;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    const token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    anna = client(t.app, token);
    gql = graphqlClient(t.app, token);
  });
  afterAll(async () => {
    await t?.close();
  });

  /** A city renamed once (revision 2), then cancelled (revision 3). */
  const cancelledCity = async () => {
    const id = `RC${++n}`;
    const base = `/api/v4/core/CITY/${id}?source=anag-3`;
    const created = await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: id, NAME: `Restore ${id}`, COUNTRY: "IT" },
    });
    expect(created.status).toBe(201);
    expect((await anna.patch(base, { data: { NAME: "Renamed" } })).status).toBe(200);
    expect((await anna.delete(base)).status).toBe(200);
    return id;
  };

  const message = (id: string) =>
    `CITY ${id} is cancelled (TREC C): restore the record first with the restore command ` +
    `(REST: POST /api/v4/core/CITY/command/restore?source=anag-3 with {"id": "${id}"}; ` +
    `GraphQL: CITY_command(source: "anag-3", name: "restore", id: "${id}")), then restore its revision.`;

  it("REST: 400 INVALID_STATE_TRANSITION naming the restore command; after it, the revision restores", async () => {
    const id = await cancelledCity();
    const refused = await anna.post(`/api/v4/core/CITY/${id}/history/1/restore?source=anag-3`);
    expect(refused.status).toBe(400);
    expect(refused.body).toMatchObject({
      code: "INVALID_STATE_TRANSITION",
      field: "TREC",
      message: message(id),
      details: { from: "C", to: "M", command: "restore" },
    });
    // What the message says, done: the command, then the revision.
    const command = await anna.post("/api/v4/core/CITY/command/restore?source=anag-3", { id });
    expect(command.status).toBe(200);
    const restored = await anna.post(`/api/v4/core/CITY/${id}/history/1/restore?source=anag-3`);
    expect(restored.status).toBe(200);
    expect(restored.body.data).toMatchObject({ CITY_ID: id, NAME: `Restore ${id}`, TREC: "M" });
  });

  it("GraphQL: the same refusal; the mutation it names restores the record", async () => {
    const id = await cancelledCity();
    const refused = await gql(
      `mutation { CITY_restore_revision(source: "anag-3", id: "${id}", revision: 2) { data { CITY_ID } } }`,
    );
    expect(refused.status).toBe(200);
    expect(refused.body.errors).toHaveLength(1);
    expect(refused.body.errors[0]).toMatchObject({
      message: message(id),
      extensions: { code: "INVALID_STATE_TRANSITION", status: 400, field: "TREC" },
    });
    const command = await gql(
      `mutation { CITY_command(source: "anag-3", name: "restore", id: "${id}") { data { CITY_ID TREC } } }`,
    );
    expect(command.body.errors).toBeUndefined();
    expect(command.body.data.CITY_command.data).toEqual({ CITY_ID: id, TREC: "M" });
    const restored = await gql(
      `mutation { CITY_restore_revision(source: "anag-3", id: "${id}", revision: 2) { data { CITY_ID NAME } } }`,
    );
    expect(restored.body.errors).toBeUndefined();
    expect(restored.body.data.CITY_restore_revision.data).toEqual({ CITY_ID: id, NAME: "Renamed" });
  });

  it("an update of a cancelled record keeps its own message", async () => {
    const id = await cancelledCity();
    const put = await anna.put(`/api/v4/core/CITY/${id}?source=anag-3`, {
      data: { CITY_ID: id, NAME: "Again", COUNTRY: "IT" },
    });
    expect(put.status).toBe(400);
    expect(put.body.message).toContain("a cancelled record can only be restored, by PATCH with TREC M");
  });
});
