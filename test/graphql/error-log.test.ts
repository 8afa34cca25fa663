// An unexpected error in a resolver is masked for the client ("Unexpected error.", INTERNAL_ERROR
// 500: no stack, no SQL) and logged with the request's id (spec graphql.md, "Errors and limits"):
// over HTTP the request's, over WebSocket the operation's (`ws-<socket>:<operation id>`).
import { Writable } from "node:stream";
import { createClient } from "graphql-ws";
import pino from "pino";
import WebSocket from "ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { webSocketUrl } from "./ws.ts";

describe("an unexpected GraphQL resolver error", () => {
  let t: TestApp;
  let token: string;
  const lines: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split("\n")) if (line) lines.push(JSON.parse(line));
        done();
      },
    });
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, LOG_LEVEL: "info" },
      logger: pino({ level: "info" }, sink),
    });
    token = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    // A fault below the resolvers that is no service error: the cities' table answers a plain Error.
    const query = t.services.db.query;
    t.services.db.query = ((text: string, ...rest: unknown[]) =>
      text.includes(`"TB_ANAG_CITY00"`)
        ? Promise.reject(new Error("boom in the driver"))
        : (query as (...a: unknown[]) => unknown)(text, ...rest)) as typeof query;
  });
  afterAll(async () => {
    await t?.close();
  });

  it("is masked for the client and logged with the request's id", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: "/graphql",
      headers: { ...bearer(token), "content-type": "application/json", "x-request-id": "trace-gql-1" },
      payload: { query: `{ CITY(source: "anag-3", limit: 1) { data { NAME } } }` },
    });
    const error = res.json().errors[0];
    expect(error).toMatchObject({
      message: "Unexpected error.",
      extensions: { code: "INTERNAL_ERROR", status: 500 },
    });
    expect(res.body).not.toContain("boom");
    const logged = lines.find((l) => l.msg === "GraphQL resolver failed");
    expect(logged).toMatchObject({ reqId: "trace-gql-1", err: { message: "boom in the driver" } });
  });

  it("over WebSocket is masked alike and logged with its socket's id and its operation's", async () => {
    const url = await webSocketUrl(t.app);
    /** A socket (kept open between its operations) whose operations have the ids `<prefix>-1`, `<prefix>-2`, … */
    const socket = (prefix: string) => {
      let next = 0;
      return createClient({
        url,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        lazy: false,
        connectionParams: { authorization: `Bearer ${token}` },
        generateID: () => `${prefix}-${++next}`,
      });
    };
    const run = (client: ReturnType<typeof createClient>) =>
      new Promise<unknown[]>((resolve, reject) => {
        const results: unknown[] = [];
        client.subscribe(
          { query: `{ CITY(source: "anag-3", limit: 1) { data { NAME } } }` },
          { next: (r) => results.push(r), error: reject, complete: () => resolve(results) },
        );
      });
    const first = socket("first");
    const second = socket("second");
    try {
      for (const client of [first, first, second]) {
        const results = await run(client);
        expect(results).toHaveLength(1);
        expect(JSON.stringify(results)).not.toContain("boom");
        expect((results[0] as { errors: unknown[] }).errors[0]).toMatchObject({
          message: "Unexpected error.",
          extensions: { code: "INTERNAL_ERROR", status: 500 },
        });
      }
    } finally {
      await first.dispose();
      await second.dispose();
    }
    const logged = lines.filter(
      (l) => l.msg === "GraphQL resolver failed" && String(l.reqId).startsWith("ws-"),
    );
    expect(logged).toHaveLength(3);
    for (const l of logged) expect(l).toMatchObject({ level: 50, err: { message: "boom in the driver" } });
    const ids = logged.map((l) => String(l.reqId));
    expect(ids[0]).toMatch(/^ws-\d+:first-1$/);
    expect(ids[1]).toMatch(/^ws-\d+:first-2$/);
    expect(ids[2]).toMatch(/^ws-\d+:second-1$/);
    const socketOf = (id: string) => id.slice(0, id.indexOf(":"));
    // One socket, one id; another socket, another.
    expect(socketOf(ids[1]!)).toBe(socketOf(ids[0]!));
    expect(socketOf(ids[2]!)).not.toBe(socketOf(ids[0]!));
  });
});
