// A GraphQL schema per access profile (docs/decisions.md, "A GraphQL schema per access profile"):
// introspection shows a caller only the dimensions it may read through some menu node, the
// mutations it may use and the fields its peso leaves, over POST, GET, SSE and WebSocket; a
// document naming anything else fails validation as for any unknown name; callers with the same
// profile share one schema object, profiles that agree on a component share its types, and a
// metadata change builds new schemas. The sample fixture's lucia (peso 3, read on anag-1 and
// sales-1: CUST and ORD) is the least privileged caller, anna (peso 1, every grant) the admin.
import type { AddressInfo } from "node:net";
import { type GraphQLObjectType, type GraphQLSchema, validateSchema } from "graphql";
import { createClient, type ExecutionResult } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { createAuth } from "../../src/auth/service.ts";
import { fixtureMetadata, fixtureSchema } from "../../src/fixtures/schema.ts";
import { graphqlResolvers } from "../../src/graphql/resolve.ts";
import { buildModel } from "../../src/metadata/build.ts";
import { buildProfileSchema } from "../../src/schema/build.ts";
import { createSchemaCache, type ProfileInputs, type SchemaCache } from "../../src/schema/cache.ts";
import { fullProfile, profileOf } from "../../src/schema/profile.ts";
import { createSharedTypes } from "../../src/schema/shared-types.ts";
import type { Principal } from "../../src/types.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLReply, graphqlClient } from "./helpers.ts";
import { subscribe } from "./sse.ts";

type Gql = (query: string, variables?: Record<string, unknown>) => Promise<GraphQLReply>;

const INTROSPECTION = `{
  __schema { queryType { fields { name } } mutationType { name } subscriptionType { fields { name } } types { name } }
  cust: __type(name: "CUST") { fields { name } }
  where: __type(name: "CUST_where") { inputFields { name } }
  ord: __type(name: "ORD") { fields { name } }
  addr: __type(name: "ADDR") { name }
}`;

const names = (list: Array<{ name: string }> | null | undefined) => (list ?? []).map((f) => f.name);

describe("GraphQL schema per access profile", () => {
  let t: TestApp;
  let anna: Gql;
  let lucia: Gql;
  let tokens: Record<"anna" | "lucia", string>;
  let principals: Record<"anna" | "lucia", Principal>;
  let cache: SchemaCache;
  let base: string;

  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    tokens = {
      anna: await loginAs(t.app, "anna", SAMPLE_USERS.anna.password),
      lucia: await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password),
    };
    anna = graphqlClient(t.app, tokens.anna);
    lucia = graphqlClient(t.app, tokens.lucia);
    // The callers' principals as the server authenticates them (grants with their menu bounds).
    const auth = await createAuth(t.services);
    try {
      const principalOf = async (token: string) =>
        (await auth.authenticateBearer(`Bearer ${token}`, "127.0.0.1", "schema-profiles")).caller.principal;
      principals = { anna: await principalOf(tokens.anna), lucia: await principalOf(tokens.lucia) };
    } finally {
      await auth.close();
    }
    cache = createSchemaCache(t.services.metadata, graphqlResolvers());
  });
  afterAll(async () => {
    cache?.close();
    await t?.close();
  });

  it("introspection shows lucia only what she may read: no ADDR, no CREDIT_LIMIT, no mutations", async () => {
    const res = await lucia(INTROSPECTION);
    expect(res.status).toBe(200);
    const { __schema: schema, cust, where, ord, addr } = res.body.data;
    const queries = names(schema.queryType.fields);
    expect(queries).toEqual(expect.arrayContaining(["CUST", "CUST_by_id", "ORD", "ORD_count", "vars"]));
    for (const hidden of ["ADDR", "ADDR_by_id", "CITY", "PROD", "LST", "PRICE", "ORDL"])
      expect(queries).not.toContain(hidden);
    expect(
      names(schema.types).filter((n: string) => /^(ADDR|CITY|PROD|LST|PRICE|ORDL)(_|$)/.test(n)),
    ).toEqual([]);
    expect(addr).toBeNull();
    // Peso 3: CREDIT_LIMIT (COD_UTENTE 2) is in no type, input or filter of hers.
    expect(names(cust.fields)).toContain("NAME");
    expect(names(cust.fields)).not.toContain("CREDIT_LIMIT");
    expect(names(where.inputFields)).toContain("NAME");
    expect(names(where.inputFields)).not.toContain("CREDIT_LIMIT");
    // Relations: CUST → CITY is absent (CITY is not hers), ORD → CUST and CUST's orders are there.
    expect(names(cust.fields)).not.toContain("CITY");
    expect(names(cust.fields)).toContain("ORD");
    expect(names(ord.fields)).toContain("CUST");
    // She writes nothing: no Mutation type; she subscribes to what she reads.
    expect(schema.mutationType).toBeNull();
    expect(names(schema.subscriptionType.fields).sort()).toEqual(["CUST_events", "ORD_events"]);
  });

  it("the admin's introspection shows every dimension, field, relation and mutation", async () => {
    const res = await anna(INTROSPECTION);
    const { __schema: schema, cust, where, addr } = res.body.data;
    const queries = names(schema.queryType.fields);
    for (const dim of ["ADDR", "CITY", "CUST", "LST", "ORD", "ORDL", "PRICE", "PROD"])
      expect(queries).toContain(dim);
    expect(addr).toEqual({ name: "ADDR" });
    expect(names(cust.fields)).toEqual(expect.arrayContaining(["CREDIT_LIMIT", "CITY", "ADDR", "ORD"]));
    expect(names(where.inputFields)).toContain("CREDIT_LIMIT");
    expect(schema.mutationType).toEqual({ name: "Mutation" });
    // The same schema as `npm run schema:print` prints: every dimension, field and mutation.
    expect(cache.forCaller(principals.anna)).toBe(cache.full());
  });

  it("a document naming what the profile hides fails validation (not a 403 or a 500)", async () => {
    const dimension = await lucia(`{ ADDR(source: "anag-2") { data { ADDR_ID } } }`);
    expect(dimension.status).toBeLessThan(500);
    expect(dimension.body.data).toBeUndefined();
    expect(dimension.body.errors).toHaveLength(1);
    expect(dimension.body.errors[0].message).toBe('Cannot query field "ADDR" on type "Query".');
    const field = await lucia(`{ CUST(source: "anag-1", limit: 1) { data { NAME CREDIT_LIMIT } } }`);
    expect(field.status).toBeLessThan(500);
    expect(field.body.errors[0].message).toBe('Cannot query field "CREDIT_LIMIT" on type "CUST".');
    const filter = await lucia(`{ CUST_count(source: "anag-1", where: {CREDIT_LIMIT: {_gt: 1}}) }`);
    expect(filter.body.errors[0].message).toMatch(/"CREDIT_LIMIT" is not defined by type "CUST_where"/);
    // No mutation at all (no Mutation type): a validation error like any unknown name, as for a
    // caller who has some mutations but not this one (it was BAD_USER_INPUT, a variable's code).
    const written = await lucia(`mutation { CUST_create(source: "anag-1", data: {NAME: "n"}) { message } }`);
    expect(written.status).toBe(200);
    expect(written.body).toEqual({
      errors: [
        {
          message: "The mutation operation is not supported by the schema.",
          locations: [{ line: 1, column: 1 }],
          extensions: { code: "GRAPHQL_VALIDATION_FAILED", status: 400 },
        },
      ],
    });
    const unknown = await anna(`mutation { NOPE_create(source: "anag-1", data: {NAME: "n"}) { message } }`);
    expect(unknown.status).toBe(written.status);
    expect(unknown.body.errors[0].extensions).toEqual(written.body.errors[0].extensions);
    expect(unknown.body.data).toBeUndefined();
    // The same document from the admin runs.
    const admin = await anna(`{ ADDR(source: "anag-2", limit: 1) { data { ADDR_ID } } }`);
    expect(admin.body.errors).toBeUndefined();
    expect(admin.body.data.ADDR.data.length).toBeGreaterThan(0);
  });

  it("what the schema shows is still decided per request: the source and the form", async () => {
    // CUST is hers, through anag-1 only: through sales-1 (which serves ORD) it is refused.
    const wrongSource = await lucia(`{ CUST(source: "sales-1", limit: 1) { data { NAME } } }`);
    expect(wrongSource.body.errors[0].extensions).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      status: 403,
    });
    const rightSource = await lucia(`{ CUST(source: "anag-1", limit: 1) { data { NAME } } }`);
    expect(rightSource.body.errors).toBeUndefined();
    expect(rightSource.body.data.CUST.data).toHaveLength(1);
  });

  it("GET and SSE subscriptions use the caller's profile too", async () => {
    const get = await t.app.inject({
      method: "GET",
      url: `/graphql?query=${encodeURIComponent(`{ addr: __type(name: "ADDR") { name } }`)}`,
      headers: { ...bearer(tokens.lucia), accept: "application/json" },
    });
    expect(get.json()).toEqual({ data: { addr: null } });
    const asAdmin = await t.app.inject({
      method: "GET",
      url: `/graphql?query=${encodeURIComponent(`{ addr: __type(name: "ADDR") { name } }`)}`,
      headers: { ...bearer(tokens.anna), accept: "application/json" },
    });
    expect(asAdmin.json()).toEqual({ data: { addr: { name: "ADDR" } } });

    const refused = await subscribe(
      base,
      tokens.lucia,
      `subscription { CITY_events(source: "anag-3") { event_id } }`,
    );
    try {
      await refused.waitFor(1);
      // graphql-js's suggestions come from her schema: they name only what she reads.
      expect(refused.events[0]!.data.errors[0].message).toBe(
        'Cannot query field "CITY_events" on type "Subscription". Did you mean "CUST_events" or "ORD_events"?',
      );
    } finally {
      await refused.close();
    }
  });

  it("a WebSocket operation runs on its caller's profile", async () => {
    const url = `${base.replace("http", "ws")}/graphql`;
    const run = async (token: string, query: string) => {
      const client = createClient({
        url,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        connectionParams: { authorization: `Bearer ${token}` },
      });
      try {
        return await new Promise<{ results: ExecutionResult[]; error: unknown }>((resolve) => {
          const results: ExecutionResult[] = [];
          client.subscribe(
            { query },
            {
              next: (r) => results.push(r as ExecutionResult),
              error: (error) => resolve({ results, error }),
              complete: () => resolve({ results, error: null }),
            },
          );
        });
      } finally {
        await client.dispose();
      }
    };
    const introspect = `{ addr: __type(name: "ADDR") { name } cust: __type(name: "CUST") { fields { name } } }`;
    const luciaSees = await run(tokens.lucia, introspect);
    expect(luciaSees.error).toBeNull();
    expect(luciaSees.results[0]!.data!.addr).toBeNull();
    expect(names((luciaSees.results[0]!.data!.cust as { fields: [] }).fields)).not.toContain("CREDIT_LIMIT");
    const annaSees = await run(tokens.anna, introspect);
    expect(annaSees.results[0]!.data!.addr).toEqual({ name: "ADDR" });
    // A hidden dimension is refused by validation, as over HTTP.
    const refused = await run(tokens.lucia, `{ ADDR(source: "anag-2") { data { ADDR_ID } } }`);
    expect(refused.error).toEqual([
      expect.objectContaining({ message: 'Cannot query field "ADDR" on type "Query".' }),
    ]);
    // A mutation from a caller without any: the same validation error as over HTTP.
    const written = await run(
      tokens.lucia,
      `mutation { CUST_create(source: "anag-1", data: {NAME: "n"}) { message } }`,
    );
    expect(written.results).toEqual([]);
    expect(written.error).toEqual([
      {
        message: "The mutation operation is not supported by the schema.",
        locations: [{ line: 1, column: 1 }],
        extensions: { code: "GRAPHQL_VALIDATION_FAILED", status: 400 },
      },
    ]);
  });

  it("callers with the same profile get the same schema object, whoever they are", () => {
    const luciaSchema = cache.forCaller(principals.lucia);
    // Another user with lucia's grants (a copy) and peso.
    const colleague: ProfileInputs = { grants: principals.lucia.grants.map((g) => ({ ...g })), peso: 3 };
    expect(cache.forCaller(colleague)).toBe(luciaSchema);
    // Other grant inputs that allow the same: a second read grant on anag-1, the grants reordered.
    const sameReach: ProfileInputs = {
      grants: [...principals.lucia.grants].reverse().concat({ ...principals.lucia.grants[0]! }),
      peso: 3,
    };
    expect(cache.profileOf(sameReach).key).toBe(cache.profileOf(principals.lucia).key);
    expect(cache.forCaller(sameReach)).toBe(luciaSchema);
    // A different peso that hides the same fields (COD_UTENTE 2 hides CREDIT_LIMIT from 3 and 4).
    expect(cache.forCaller({ grants: principals.lucia.grants, peso: 4 })).toBe(luciaSchema);
    // Peso 2 shows CREDIT_LIMIT: another profile, another schema.
    const peso2 = cache.forCaller({ grants: principals.lucia.grants, peso: 2 });
    expect(peso2).not.toBe(luciaSchema);
    expect(Object.keys((peso2.getType("CUST") as GraphQLObjectType).getFields())).toContain("CREDIT_LIMIT");
  });

  it("profiles that agree on a component share its types", () => {
    const lucias = cache.forCaller(principals.lucia);
    // lucia's grants plus write on sales-1: ORD's mutations too; CUST and ORD alike.
    const grants = principals.lucia.grants;
    const writer = cache.forCaller({
      grants: grants.map((g) =>
        g.COD_MENU === "sales-1" ? { ...g, OPERATIONS: ["read", "write"], LEVEL: 3 } : g,
      ),
      peso: 3,
    });
    expect(writer).not.toBe(lucias);
    expect(writer.getMutationType()?.getFields().ORD_create).toBeDefined();
    expect(lucias.getMutationType()).toBeUndefined();
    for (const name of ["CUST", "ORD", "CUST_page", "ORD_page", "CUST_where", "ORD_order_by"])
      expect(writer.getType(name), name).toBe(lucias.getType(name));
    // Reading CUST without ORD: another component ({CUST}: no ORD relation), the inputs still shared.
    const custOnly = cache.forCaller({ grants: grants.filter((g) => g.COD_MENU === "anag-1"), peso: 3 });
    expect(custOnly.getType("ORD")).toBeUndefined();
    expect(custOnly.getType("CUST")).not.toBe(lucias.getType("CUST"));
    expect(Object.keys((custOnly.getType("CUST") as GraphQLObjectType).getFields())).not.toContain("ORD");
    expect(custOnly.getType("CUST_where")).toBe(lucias.getType("CUST_where"));
    // The admin's CUST shows CREDIT_LIMIT: its own types.
    expect(cache.full().getType("CUST_where")).not.toBe(lucias.getType("CUST_where"));
  });

  it("keeps at most maxSchemas schemas, and a let-go profile is built again", () => {
    const small = createSchemaCache(t.services.metadata, graphqlResolvers(), { maxSchemas: 2 });
    try {
      const first = small.forCaller(principals.lucia);
      small.forCaller(principals.anna);
      small.forCaller({ grants: principals.lucia.grants, peso: 2 });
      expect(small.stats().schemas).toBe(2);
      const again = small.forCaller(principals.lucia);
      expect(again).not.toBe(first);
      expect(Object.keys(again.getTypeMap())).toEqual(Object.keys(first.getTypeMap()));
    } finally {
      small.close();
    }
  });

  it("a metadata change builds new schemas: a new field appears in lucia's", async () => {
    const before = cache.forCaller(principals.lucia);
    const version = cache.version();
    const rest = await clientFor(t.app, "anna");
    const added = await rest.post("/api/v4/core/VAR?source=erp", {
      data: { COD_DIM: "CUST", NUM_VAR: 41, COD_VAR: "PROFILE_NOTE", DATA_TYPE: "STRING", LENGTH: 20 },
    });
    expect(added.status).toBe(201);
    const after = cache.forCaller(principals.lucia);
    expect(after).not.toBe(before);
    expect(cache.version()).toBeGreaterThan(version!);
    expect(Object.keys((after.getType("CUST") as GraphQLObjectType).getFields())).toContain("PROFILE_NOTE");
    const seen = await lucia(`{ __type(name: "CUST") { fields { name } } }`);
    expect(names(seen.body.data.__type.fields)).toContain("PROFILE_NOTE");
  });
});

describe("schema profiles of a model (no database)", () => {
  // W: SECRET is peso 1 in every form; FORM_ONLY is peso 1 by default, and form "desk"'s row gives no
  // weight (which does not lift the field's own: docs/decisions.md, "A form's row never lifts a weight").
  // Z: every field a caller may send is peso 1.
  const rows = fixtureMetadata(
    fixtureSchema.parse({
      TB_MENU: [
        { COD_MENU: "w-1", NLEFT: 1, NRIGHT: 2, COD_DIM: "W" },
        { COD_MENU: "z-1", NLEFT: 3, NRIGHT: 4, COD_DIM: "Z" },
      ],
      TB_DIM: [
        { COD_DIM: "W", TABLE_NAME: "TB_ANAG_W00", ID_FIELD: "ID" },
        { COD_DIM: "Z", TABLE_NAME: "TB_ANAG_Z00", ID_FIELD: "ID" },
      ],
      TB_VAR: [
        { COD_DIM: "W", NUM_VAR: 1, COD_VAR: "ID", DATA_TYPE: "INTEGER" },
        { COD_DIM: "W", NUM_VAR: 2, COD_VAR: "SECRET", DATA_TYPE: "STRING", LENGTH: 10 },
        { COD_DIM: "W", NUM_VAR: 3, COD_VAR: "FORM_ONLY", DATA_TYPE: "STRING", LENGTH: 10 },
        { COD_DIM: "Z", NUM_VAR: 1, COD_VAR: "ID", DATA_TYPE: "INTEGER" },
        { COD_DIM: "Z", NUM_VAR: 2, COD_VAR: "NOTE", DATA_TYPE: "STRING", LENGTH: 10 },
      ],
      TB_COST: [
        { COD_DIM: "W", NUM_COST: 1, COD_VAR: "SECRET", COD_ON_OFF: "LDRNM", COD_UTENTE: 1 },
        { COD_DIM: "W", NUM_COST: 2, COD_VAR: "FORM_ONLY", COD_ON_OFF: "LDRNM", COD_UTENTE: 1 },
        { COD_DIM: "W", NUM_COST: 3, COD_VAR: "FORM_ONLY", COD_ON_OFF: "LDRNM", CENTER_DETT: "desk" },
        { COD_DIM: "Z", NUM_COST: 1, COD_VAR: "ID", COD_ON_OFF: "LDR", COD_UTENTE: 1 },
        { COD_DIM: "Z", NUM_COST: 2, COD_VAR: "NOTE", COD_ON_OFF: "LDRNM", COD_UTENTE: 1 },
      ],
    }),
  );
  const model = buildModel(rows, 1);
  const everything = [
    { COD_MENU: "all", NLEFT: 0, NRIGHT: 5, OPERATIONS: ["read", "write"], LEVEL: 4 },
  ] as const;
  const grants = everything.map((g) => ({ ...g, OPERATIONS: [...g.OPERATIONS] }));

  it("a field its own weight hides is absent, whatever a form's row says (the form is the caller's choice)", () => {
    const profile = profileOf(model, grants, 3);
    const w = profile.dimensions.get("W")!;
    expect(w.shown.fields.map((f) => f.code)).not.toContain("FORM_ONLY");
    expect(w.shown.fields.map((f) => f.code)).not.toContain("SECRET");
    expect(w.shown.hidden).toBe("SECRET,FORM_ONLY");
    expect(profileOf(model, grants, 1).dimensions.get("W")!.shown.hidden).toBe("");
  });

  it("a dimension with no field the caller may send has no create mutation, and the schema is valid", () => {
    const profile = profileOf(model, grants, 3);
    const schema: GraphQLSchema = buildProfileSchema(
      profile,
      createSharedTypes(model, graphqlResolvers(), { maxComponentDimensions: 10 }),
    );
    expect(validateSchema(schema)).toEqual([]);
    const mutations = Object.keys(schema.getMutationType()!.getFields());
    expect(mutations).not.toContain("Z_create");
    expect(mutations).not.toContain("Z_batch_create");
    expect(mutations).toContain("Z_update");
    expect(mutations).toContain("W_create");
    expect(Object.keys((schema.getType("Z") as GraphQLObjectType).getFields())).not.toContain("NOTE");
    // The full profile shows them all.
    const full = fullProfile(model);
    expect(full.dimensions.get("Z")!.shown.hidden).toBe("");
  });

  it("no readable dimension: a valid schema with Query._empty only", () => {
    const schema = buildProfileSchema(
      profileOf(model, [], 3),
      createSharedTypes(model, graphqlResolvers(), { maxComponentDimensions: 10 }),
    );
    expect(validateSchema(schema)).toEqual([]);
    expect(Object.keys(schema.getQueryType()!.getFields())).toEqual(["_empty"]);
    expect(schema.getMutationType()).toBeUndefined();
    expect(schema.getSubscriptionType()).toBeUndefined();
  });
});
