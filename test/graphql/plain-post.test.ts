// The plain GraphQL POST transport (src/graphql/plain-post.ts): it takes only a JSON POST of a
// query or mutation, and it answers each request byte for byte as yoga does (status, content type,
// body: data, masked errors, refusals), the operation counted once: both run the one chain. The
// WebSocket transport (src/graphql/websocket.ts, the graphql-ws client) answers each with the same
// body: a refusal before running as its `error` message's errors, else its one result.
import type { FastifyRequest } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { documentHash } from "../../src/graphql/persisted.ts";
import { plainRequest } from "../../src/graphql/plain-post.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { type GraphQLSocket, graphqlSocket, webSocketUrl } from "./ws.ts";

/** A document sent as a persisted operation. */
const PERSISTED = `# persisted\n{ CUST(source: "anag-1", limit: 2, order_by: [{CUST_ID: asc}]) { data { CUST_ID } } }`;

/** The Accept headers the fast path serves (none, any, JSON, GraphQL's response media type). */
const ACCEPTS = [undefined, "*/*", "application/json", "application/graphql-response+json"];

describe("GraphQL plain POST transport", () => {
  let t: TestApp;
  let tokens: Record<string, string>;
  const sockets: Record<string, GraphQLSocket> = {};

  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    tokens = {
      anna: await loginAs(t.app, "anna", SAMPLE_USERS.anna.password),
      lucia: await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password),
    };
    const url = await webSocketUrl(t.app);
    for (const user of ["anna", "lucia"]) sockets[user] = graphqlSocket(url, tokens[user]!);
  });
  afterAll(async () => {
    for (const socket of Object.values(sockets)) await socket.dispose();
    await t?.close();
  });

  /** The request sent plainly (the fast path's) and with a URL query (which leaves it to yoga). */
  async function both(
    user: string,
    body: Record<string, unknown>,
    accept: string | undefined,
    path = "/graphql",
  ) {
    const send = async (url: string) => {
      const res = await t.app.inject({
        method: "POST",
        url,
        headers: {
          ...bearer(tokens[user]!),
          "content-type": "application/json",
          ...(accept === undefined ? {} : { accept }),
        },
        payload: body,
      });
      return { status: res.statusCode, type: res.headers["content-type"], body: res.body };
    };
    return { fast: await send(path), yoga: await send(`${path}?via=yoga`) };
  }

  async function operationsCounted(): Promise<number> {
    const metric = await t.services.metrics.graphqlOperations.get();
    return metric.values.reduce((sum, v) => sum + v.value, 0);
  }

  it.each([
    [
      "a query",
      "anna",
      {
        query: `{ CUST(source: "anag-1", limit: 3, order_by: [{CUST_ID: asc}]) { data { CUST_ID NAME CITY { NAME } } } }`,
      },
    ],
    [
      "a field the caller may not read",
      "lucia",
      {
        query: `{ CUST(source: "anag-1", limit: 2, order_by: [{CUST_ID: asc}]) { data { NAME CREDIT_LIMIT } } }`,
      },
    ],
    [
      "a service error in a resolver",
      "anna",
      { query: `{ CUST(source: "no-such-source") { data { CUST_ID } } }` },
    ],
    ["a missing record", "anna", { query: `{ CUST_by_id(source: "anag-1", id: "999999") { CUST_ID } }` }],
    [
      "variables and a named operation",
      "anna",
      {
        query: `query A($id: ID!) { CUST_by_id(source: "anag-1", id: $id) { CUST_ID NAME } } query B { __typename }`,
        variables: { id: "1" },
        operationName: "A",
      },
    ],
    [
      "a variable that does not coerce",
      "anna",
      {
        query: `query ($id: ID!) { CUST_by_id(source: "anag-1", id: $id) { NAME } }`,
        variables: { id: { x: 1 } },
      },
    ],
    ["an unknown operation name", "anna", { query: `query A { __typename }`, operationName: "B" }],
    [
      "a document that does not validate",
      "anna",
      { query: `{ CUST(source: "anag-1") { data { NO_SUCH_FIELD } } }` },
    ],
    ["a document that does not parse", "anna", { query: `{ CUST(` }],
    [
      "a document over the depth limit",
      "anna",
      {
        query: `{ ADDR(source: "anag-2") { data { CUST { CITY { NAME } ADDR { CUST { ADDR { CUST { ADDR { CUST { NAME } } } } } } } } } }`,
      },
    ],
    [
      "a mutation refused by validation of its data",
      "anna",
      {
        query: `mutation { CUST_create(source: "anag-1", data: {NAME: "", CREDIT_LIMIT: -1}) { data { CUST_ID } } }`,
      },
    ],
    [
      "a persisted query sent with its document",
      "anna",
      {
        query: PERSISTED,
        extensions: { persistedQuery: { version: 1, sha256Hash: documentHash(PERSISTED) } },
      },
    ],
    [
      "a persisted query by an unknown hash",
      "anna",
      {
        extensions: {
          persistedQuery: { version: 1, sha256Hash: documentHash("# never sent\n{ __typename }") },
        },
      },
    ],
    [
      "a persisted query whose hash is not its document's",
      "anna",
      { query: PERSISTED, extensions: { persistedQuery: { version: 1, sha256Hash: documentHash("{ x }") } } },
    ],
  ])("%s: the same answer as yoga's, the same body over WebSocket", async (_name, user, body) => {
    const before = await operationsCounted();
    let answer: { body: string } | undefined;
    for (const accept of ACCEPTS) {
      const { fast, yoga } = await both(user, body, accept);
      expect(fast).toEqual(yoga);
      const { fast: v4 } = await both(user, body, accept, "/api/v4/graphql");
      expect(v4).toEqual(yoga);
      answer = yoga;
    }
    // graphql-ws requires a query string: a persisted operation's hash alone goes with "".
    expect(await sockets[user]!.body({ query: "", ...body })).toBe(answer!.body);
    // An executed operation is counted once per request or socket operation, whichever path answered it.
    const executed = await operationsCounted();
    expect([0, 4 * ACCEPTS.length + 1]).toContain(executed - before);
  });

  it("every error carries extensions.code and extensions.status, on every transport (spec graphql.md)", async () => {
    const bodies: Array<[Record<string, unknown>, string, number]> = [
      [
        {
          query: `query ($id: ID!) { CUST_by_id(source: "anag-1", id: $id) { NAME } }`,
          variables: { id: { x: 1 } },
        },
        "BAD_USER_INPUT",
        400,
      ],
      [{ query: `{ CUST(source: "anag-1") { data { NO_SUCH_FIELD } } }` }, "GRAPHQL_VALIDATION_FAILED", 400],
      [{ query: `{ CUST(` }, "GRAPHQL_PARSE_FAILED", 400],
      [{ query: `query A { __typename }`, operationName: "B" }, "OPERATION_RESOLUTION_FAILURE", 400],
    ];
    for (const [body, code, status] of bodies) {
      const { fast, yoga } = await both("anna", body, "application/json");
      const socket = await sockets.anna!.body(body as { query: string });
      for (const text of [fast.body, yoga.body, socket]) {
        const errors = JSON.parse(text).errors as Array<{ extensions?: Record<string, unknown> }>;
        expect(errors.length, text).toBeGreaterThan(0);
        for (const e of errors) expect(e.extensions, text).toMatchObject({ code, status });
      }
    }
  });

  it("takes only a JSON POST of query, variables and operationName", () => {
    const request = (
      over: Partial<Record<string, unknown>> = {},
      body: unknown = { query: "{ __typename }" },
    ) =>
      ({
        method: "POST",
        url: "/graphql",
        headers: { accept: "application/json", "content-type": "application/json; charset=utf-8" },
        body,
        ...over,
      }) as unknown as FastifyRequest;
    expect(plainRequest(request())?.query).toBe("{ __typename }");
    for (const accept of ACCEPTS) {
      const headers = { "content-type": "application/json", ...(accept === undefined ? {} : { accept }) };
      expect(plainRequest(request({ headers }))?.mediaType).toBe(
        accept === "application/graphql-response+json" ? accept : "application/json",
      );
    }
    const headers = {
      accept: "application/graphql-response+json, application/json",
      "content-type": "application/json",
    };
    expect(plainRequest(request({ headers }))).toBeNull();
    expect(plainRequest(request({ method: "GET" }))).toBeNull();
    expect(plainRequest(request({ url: "/graphql?x=1" }))).toBeNull();
    expect(
      plainRequest(request({ headers: { accept: "text/event-stream", "content-type": "application/json" } })),
    ).toBeNull();
    expect(
      plainRequest(request({ headers: { accept: "application/json", "content-type": "text/plain" } })),
    ).toBeNull();
    expect(plainRequest(request({}, [{ query: "{ __typename }" }]))).toBeNull();
    expect(plainRequest(request({}, { query: "{ __typename }", extensions: {} }))).toBeNull();
    expect(plainRequest(request({}, { query: "{ __typename }", variables: [1] }))).toBeNull();
    expect(plainRequest(request({}, { query: 1 }))).toBeNull();
    expect(plainRequest(request({}, { query: "{ a }", operationName: 2 }))).toBeNull();
  });
});
