// An unexpected error in a resolver is masked for the client ("Unexpected error.", INTERNAL_ERROR
// 500: no stack, no SQL) and logged with the request's id (spec graphql.md, "Errors and limits").
import { Writable } from "node:stream";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

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
});
