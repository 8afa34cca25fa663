// A GraphQL request whose Accept header takes nothing it could be answered with is 406 with the
// standard error body (NOT_ACCEPTABLE, status 406, which Accept to send), never yoga's bare `null`,
// and before anything runs (a mutation writes nothing). A subscription asked for without
// text/event-stream is such a request: it is refused before it is admitted, so it holds none of
// its user's live-subscription places (before, each one took a place for as long as its session
// lived, and SUBSCRIPTIONS_MAX_PER_USER such requests locked the user out of subscribing).
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { subscribe } from "./sse.ts";

const CUST = `subscription { CUST_events(source: "anag-1") { event_type record_id } }`;

const SUBSCRIPTION_406 = {
  errors: [
    {
      message:
        "A subscription streams its results: send Accept: text/event-stream (GraphQL over SSE), or subscribe over the WebSocket.",
      extensions: { code: "NOT_ACCEPTABLE", status: 406 },
    },
  ],
};

const REQUEST_406 = {
  errors: [
    {
      message:
        "Send Accept: application/json or application/graphql-response+json (or text/event-stream for a subscription); nothing else is answered here.",
      extensions: { code: "NOT_ACCEPTABLE", status: 406 },
    },
  ],
};

describe.each(BACKENDS)("GraphQL requests answered 406 (%s)", (backend) => {
  let t: TestApp;
  let base: string;
  let token: string;

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, EVENTS_POLL_MS: "60000", SUBSCRIPTIONS_MAX_PER_USER: "2" },
    });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
  });
  afterAll(async () => {
    await t?.close();
  });

  const send = (method: "GET" | "POST", path: string, accept: string, query: string) =>
    t.app.inject({
      method,
      url: method === "GET" ? `${path}?query=${encodeURIComponent(query)}` : path,
      headers: {
        ...bearer(token),
        accept,
        ...(method === "POST" ? { "content-type": "application/json" } : {}),
      },
      ...(method === "POST" ? { payload: { query } } : {}),
    });

  it("a method other than GET and POST is 405 with Allow and a GraphQL error body", async () => {
    for (const path of ["/graphql", "/api/v4/graphql"])
      for (const method of ["PUT", "PATCH", "DELETE"] as const) {
        const res = await t.app.inject({ method, url: path, headers: bearer(token) });
        expect(res.statusCode, `${method} ${path}`).toBe(405);
        expect(res.headers.allow).toBe("GET, POST");
        expect(res.json()).toEqual({
          errors: [
            {
              message: `${path} takes GET and POST (and WebSocket upgrades).`,
              extensions: { code: "METHOD_NOT_ALLOWED", status: 405 },
            },
          ],
        });
      }
  });

  it("a subscription without text/event-stream is 406 with an error body, and holds no place", async () => {
    const cases = [
      ["POST", "/graphql", "application/json"],
      ["POST", "/graphql", "application/graphql-response+json"],
      ["GET", "/graphql", "application/json"],
      ["POST", "/api/v4/graphql", "application/json"],
      ["GET", "/api/v4/graphql", "application/json"],
    ] as const;
    for (const [method, path, accept] of cases) {
      const res = await send(method, path, accept, CUST);
      expect([method, path, accept, res.statusCode]).toEqual([method, path, accept, 406]);
      expect(res.headers["content-type"]).toBe(`${accept}; charset=utf-8`);
      expect(res.json()).toEqual(SUBSCRIPTION_406);
    }
    // Five refusals, and anna's two places are still free: two subscriptions stream.
    const subs = [await subscribe(base, token, CUST), await subscribe(base, token, CUST)];
    try {
      for (const s of subs) {
        expect([s.status, s.contentType]).toEqual([200, "text/event-stream"]);
        // A refusal (TOO_MANY_SUBSCRIPTIONS) would arrive at once; an admitted one stays silent.
        const refused = await s.waitFor(1, 300).then(
          () => s.events[0]!.data,
          () => null,
        );
        expect(refused).toBeNull();
        expect(s.isClosed()).toBe(false);
      }
    } finally {
      for (const s of subs) await s.close();
    }
  });

  it("an Accept header that takes no answer (XML, HTML) is 406 with an error body, and nothing runs", async () => {
    for (const path of ["/graphql", "/api/v4/graphql"]) {
      for (const accept of ["application/xml", "text/html", "application/json; charset=latin1"]) {
        const res = await send("POST", path, accept, "{ __typename }");
        expect([path, accept, res.statusCode]).toEqual([path, accept, 406]);
        expect(res.headers["content-type"]).toMatch(/^application\/json/);
        expect(res.json()).toEqual(REQUEST_406);
      }
      const get = await send("GET", path, "application/xml", "{ __typename }");
      expect(get.statusCode).toBe(406);
      expect(get.json()).toEqual(REQUEST_406);
    }
    // A mutation so refused writes nothing.
    const refused = await send(
      "POST",
      "/graphql",
      "application/xml",
      `mutation { CITY_create(source: "anag-3", data: {CITY_ID: "NA406", NAME: "Not accepted", COUNTRY: "IT"}) { message } }`,
    );
    expect(refused.statusCode).toBe(406);
    expect(refused.json()).toEqual(REQUEST_406);
    const read = await send(
      "POST",
      "/graphql",
      "application/json",
      `{ CITY_by_id(source: "anag-3", id: "NA406") { CITY_ID } }`,
    );
    expect(read.json()).toEqual({ data: { CITY_by_id: null } });
    // What can be answered still is: a query with a wildcard or SSE, a subscription with both.
    expect((await send("POST", "/graphql", "*/*", "{ __typename }")).json()).toEqual({
      data: { __typename: "Query" },
    });
    expect((await send("POST", "/graphql", "text/event-stream", "{ __typename }")).statusCode).toBe(200);
  });
});
