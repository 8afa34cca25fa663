// One GraphQL schema per metadata version, the same for every caller (docs/decisions.md, "Access
// decided once"): introspection shows every dimension and field, OpenAPI only what the caller
// reads, and reading through GraphQL still denies what the caller's access view does not allow.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

const CUST_FIELDS = `{ __type(name: "CUST") { fields { name } } __schema { queryType { fields { name } } } }`;

describe("GraphQL schema per metadata version, not per access profile", () => {
  let t: TestApp;
  let anna: Gql;
  let lucia: Gql;

  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    anna = graphqlClient(t.app, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password));
    lucia = graphqlClient(t.app, await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password));
  });
  afterAll(async () => {
    await t?.close();
  });

  it("introspection is the same for every caller; OpenAPI is the caller's", async () => {
    const [a, l] = await Promise.all([anna(CUST_FIELDS), lucia(CUST_FIELDS)]);
    expect(l.body).toEqual(a.body);
    const names = (reply: GraphQLReply) => reply.body.data.__type.fields.map((f: { name: string }) => f.name);
    expect(names(l)).toContain("CREDIT_LIMIT");
    const queries = l.body.data.__schema.queryType.fields.map((f: { name: string }) => f.name);
    expect(queries).toContain("ADDR");

    const openApi = await (await clientFor(t.app, "lucia")).get("/api/v4/openapi.json");
    expect(openApi.status).toBe(200);
    expect(Object.keys(openApi.body.components.schemas.CUST.properties)).not.toContain("CREDIT_LIMIT");
    expect(openApi.body.components.schemas.ADDR).toBeUndefined();
  });

  it("what introspection shows but the view denies is refused when read", async () => {
    const field = await lucia(`{ CUST(source: "anag-1", limit: 1) { data { NAME CREDIT_LIMIT } } }`);
    expect(field.body.data.CUST.data[0].CREDIT_LIMIT).toBeNull();
    expect(field.body.errors[0]).toMatchObject({
      path: ["CUST", "data", 0, "CREDIT_LIMIT"],
      extensions: { code: "FIELD_NOT_VISIBLE", status: 403, field: "CREDIT_LIMIT" },
    });
    const filtered = await lucia(
      `{ CUST(source: "anag-1", where: {CREDIT_LIMIT: {_gt: 1}}) { data { NAME } } }`,
    );
    expect(filtered.body.errors[0].extensions).toMatchObject({
      code: "INVALID_FIELD",
      field: "CREDIT_LIMIT",
    });
    const dimension = await lucia(`{ ADDR(source: "anag-2") { data { ADDR_ID } } }`);
    expect(dimension.body.errors[0].extensions).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      status: 403,
    });
    const written = await lucia(`mutation { CUST_create(source: "anag-1", data: {NAME: "n"}) { message } }`);
    expect(written.body.errors[0].extensions).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      status: 403,
    });
  });
});
