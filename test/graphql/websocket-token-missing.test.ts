// A GraphQL WebSocket opened without a token is closed 4401 with a reason that says where the token
// goes over WebSocket (connection_init's payload, under `authorization` or `Authorization`), not
// HTTP's "The Authorization header with a bearer token is required.": a browser cannot set headers
// on a WebSocket. HTTP keeps its message. With the real `graphql-ws` client, as websocket.test.ts.
import { createClient } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { webSocketUrl } from "./ws.ts";

interface CloseEvent {
  code: number;
  reason: string;
}

const REASON =
  'A bearer token is required in connection_init\'s payload: {"authorization": "Bearer <token>"} (or "Authorization").';

describe("a GraphQL WebSocket without a token", () => {
  let t: TestApp;
  let url: string;

  beforeAll(async () => {
    t = await createTestApp(BACKENDS[0]!, { fixture: "sample", env: NO_RATE_LIMITS });
    url = await webSocketUrl(t.app);
  }, 120_000);
  afterAll(async () => {
    await t?.close();
  });

  /** Opens a socket with `connectionParams`, runs one query; the close event, or the query's answer. */
  async function attempt(connectionParams: Record<string, unknown> | undefined) {
    let closed: (e: CloseEvent) => void = () => {};
    const close = new Promise<CloseEvent>((resolve) => {
      closed = resolve;
    });
    const client = createClient({
      url,
      webSocketImpl: WebSocket,
      retryAttempts: 0,
      connectionParams,
      on: { closed: (e) => closed(e as CloseEvent) },
    });
    const answer = await new Promise<unknown>((resolve) => {
      client.subscribe(
        { query: `{ CITY(source: "anag-3", limit: 1) { data { CITY_ID } } }` },
        { next: (r) => resolve(r), error: (e) => resolve(e), complete: () => {} },
      );
    });
    await client.dispose();
    return { answer, closed: await close };
  }

  it("no connection_init payload, or one without the token: 4401 saying where the token goes", async () => {
    for (const params of [undefined, {}, { authorization: "" }, { token: "abc" }]) {
      const { closed } = await attempt(params);
      expect(closed, JSON.stringify(params)).toEqual(expect.objectContaining({ code: 4401, reason: REASON }));
    }
    expect(Buffer.byteLength(REASON)).toBeLessThanOrEqual(123);
  });

  it("the token under either key the message names authenticates the socket", async () => {
    const token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    for (const key of ["authorization", "Authorization"]) {
      const { answer } = await attempt({ [key]: `Bearer ${token}` });
      expect(answer, key).toMatchObject({ data: { CITY: { data: [{ CITY_ID: expect.any(String) }] } } });
    }
  });

  it("a bad token keeps its own reason; HTTP keeps its header message", async () => {
    const { closed } = await attempt({ authorization: "Bearer not-a-token" });
    expect(closed.code).toBe(4401);
    expect(closed.reason).not.toBe(REASON);
    const http = await t.app.inject({
      method: "POST",
      url: "/graphql",
      headers: { "content-type": "application/json" },
      payload: { query: "{ __typename }" },
    });
    expect(http.statusCode).toBe(401);
    expect(http.json().errors[0]).toMatchObject({
      message: "The Authorization header with a bearer token is required.",
      extensions: { code: "TOKEN_MISSING", status: 401 },
    });
  });
});
