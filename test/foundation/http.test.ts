// The HTTP foundation (src/http/server.ts, src/http/error-handler.ts) through the real app:
// health, readiness, the standard error body, body rules, request ids, CORS, the DIM smoke route.
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.ts";
import {
  ApiError,
  BadRequestError,
  ConflictError,
  MetadataError,
  NotFoundError,
  PermissionDeniedError,
  RateLimitError,
} from "../../src/errors.ts";
import { mapError } from "../../src/http/error-handler.ts";
import { buildHttpServer } from "../../src/http/server.ts";
import { createLogger } from "../../src/logger.ts";
import { loadConfig } from "../../src/config.ts";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, createTestServices, type TestApp } from "../helpers/env.ts";

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

function expectStandardBody(body: Record<string, unknown>, status: number, code: string) {
  expect(body).toMatchObject({ error: expect.any(String), message: expect.any(String), code, status });
}

/** BODY_LIMIT_BYTES of the app under test. */
const BODY_LIMIT = 2048;

describe.each(BACKENDS)("HTTP foundation on %s", (backend) => {
  let t: TestApp;
  let app: FastifyInstance;
  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: { BODY_LIMIT_BYTES: String(BODY_LIMIT) } });
    app = t.app;
  });
  afterAll(async () => {
    await t?.close();
  });

  it("GET /healthz answers 200 with each dependency's state", async () => {
    // The database's state is `unknown` until its first check has answered (it waits 250 ms).
    let res = await app.inject({ method: "GET", url: "/healthz" });
    for (let i = 0; i < 50 && res.json().dependencies.database === "unknown"; i++)
      res = await app.inject({ method: "GET", url: "/healthz" });
    expect(res.statusCode).toBe(200);
    // No broker, Redis or S3 configured: their in-process alternatives.
    expect(res.json()).toEqual({
      status: "ok",
      dependencies: { database: "up", broker: "embedded", media: "embedded", redis: "embedded" },
    });
  });

  it("GET /readyz answers 200 with database ok and migrations ok", async () => {
    const res = await app.inject({ method: "GET", url: "/readyz" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({ status: "ready", checks: { database: "ok", migrations: "ok" } });
  });

  it("an unknown route is a 404 in the standard body", async () => {
    for (const [method, url] of [
      ["GET", "/no/such/route"],
      ["POST", "/api/v3/core/CUST"],
      ["DELETE", "/healthz"],
    ] as const) {
      const res = await app.inject({ method, url });
      expect(res.statusCode).toBe(404);
      expect(res.headers["content-type"]).toMatch(/^application\/json/);
      expect(res.json()).toEqual({
        error: "NotFound",
        message: `No route for ${method} ${url}`,
        code: "NOT_FOUND",
        status: 404,
      });
    }
  });

  it("an invalid JSON body is a 400 in the standard body", async () => {
    for (const url of ["/auth/login", "/api/v4/core/CUST", "/no/such/route"]) {
      const res = await app.inject({
        method: "POST",
        url,
        headers: { "content-type": "application/json" },
        payload: '{"data": {"NAME": ',
      });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ error: "BadRequest", code: "INVALID_JSON", status: 400 });
    }
  });

  it("a JSON body that is not UTF-8 is a 400 INVALID_ENCODING, not stored as U+FFFD; UTF-8 passes", async () => {
    for (const url of ["/api/v4/core/CUST?source=anag-1", "/graphql"]) {
      const bad = await app.inject({
        method: "POST",
        url,
        headers: { "content-type": "application/json" },
        // Latin-1 é, then 0xFF 0xFE: bytes no UTF-8 text holds.
        payload: Buffer.concat([
          Buffer.from('{"data":{"NAME":"lat'),
          Buffer.from([0xe9, 0x20, 0xff, 0xfe]),
          Buffer.from('"}}'),
        ]),
      });
      expect(bad.statusCode).toBe(400);
      // REST's standard body; GraphQL's errors[] with the same code and status.
      const body = bad.json();
      expect(body.errors?.[0]?.extensions ?? body).toMatchObject({ code: "INVALID_ENCODING", status: 400 });
      // The same text in UTF-8 is parsed and goes on to the route (here: 401, no token).
      const good = await app.inject({
        method: "POST",
        url,
        headers: { "content-type": "application/json" },
        payload: Buffer.from('{"data":{"NAME":"latté ÿþ"}}', "utf8"),
      });
      expect(good.statusCode).toBe(401);
    }
  });

  it("a compressed JSON body is a 415 saying to send it uncompressed, not 'not valid JSON'", async () => {
    const { gzipSync } = await import("node:zlib");
    const res = await app.inject({
      method: "POST",
      url: "/api/v4/core/CUST?source=anag-1",
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      payload: gzipSync(Buffer.from('{"data":{"NAME":"x"}}')),
    });
    expect(res.statusCode).toBe(415);
    expect(res.json()).toMatchObject({ code: "UNSUPPORTED_MEDIA_TYPE", status: 415 });
    expect(res.json().message).toContain("uncompressed");
  });

  it("a body nested deeper than 64 levels is a 400 INVALID_JSON; 64 levels are parsed", async () => {
    const nested = (levels: number) =>
      `{"data":{"SPECS":${"[".repeat(levels - 2)}1${"]".repeat(levels - 2)}}}`;
    const deep = await app.inject({
      method: "POST",
      url: "/api/v4/core/PROD?source=catalog-1",
      headers: { "content-type": "application/json" },
      payload: nested(200),
    });
    expect(deep.statusCode).toBe(400);
    expect(deep.json()).toMatchObject({
      code: "INVALID_JSON",
      status: 400,
      message: "The request body is nested deeper than 64 levels.",
    });
    // At the limit the body is parsed and goes on to the route (here: 401, no token).
    const atLimit = await app.inject({
      method: "POST",
      url: "/api/v4/core/PROD?source=catalog-1",
      headers: { "content-type": "application/json" },
      payload: nested(64),
    });
    expect(atLimit.statusCode).toBe(401);
  });

  it("an empty body declared as JSON is no body: DELETE passes, a route that needs a body answers 400", async () => {
    const login = await app.inject({
      method: "POST",
      url: "/auth/login",
      headers: { "content-type": "application/json" },
      payload: "",
    });
    expect(login.statusCode).toBe(400);
    expect(login.json()).toMatchObject({ status: 400, code: expect.stringMatching(/^[A-Z_]+$/) });
    const del = await app.inject({
      method: "DELETE",
      url: "/api/v4/core/CUST/1?source=anag-1",
      headers: { "content-type": "application/json" },
      payload: "",
    });
    // Not refused for its (absent) body: it reaches authentication.
    expect(del.statusCode).toBe(401);
    expect(del.json()).toMatchObject({ code: "TOKEN_MISSING", status: 401 });
  });

  it("a JSON body that tries to set __proto__ is refused, not merged", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/auth/login",
      headers: { "content-type": "application/json" },
      payload: '{"username":"anna","__proto__":{"admin":true}}',
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: "INVALID_JSON", status: 400 });
    // The answer says which member, not "not valid JSON" as for a syntax error.
    expect(res.json().message).toMatch(/member named __proto__/);
    const nested = await app.inject({
      method: "POST",
      url: "/api/v4/core/CUST",
      headers: { "content-type": "application/json" },
      payload: '{"data":{"NAME":"x","constructor":{"prototype":{"admin":true}}}}',
    });
    expect(nested.statusCode).toBe(400);
    expect(nested.json().message).toMatch(/constructor holding prototype/);
    // Malformed JSON keeps its own message.
    const broken = await app.inject({
      method: "POST",
      url: "/auth/login",
      headers: { "content-type": "application/json" },
      payload: '{"__proto__": ',
    });
    expect(broken.json().message).not.toMatch(/__proto__/);
  });

  it("an unsupported content type is a 415 UNSUPPORTED_MEDIA_TYPE", async () => {
    for (const type of ["text/xml", "text/plain", "application/x-www-form-urlencoded"]) {
      const res = await app.inject({
        method: "POST",
        url: "/auth/login",
        headers: { "content-type": type },
        payload: "username=anna",
      });
      expect(res.statusCode).toBe(415);
      expect(res.json()).toEqual({
        error: "UnsupportedMediaType",
        message: "Unsupported Content-Type; send application/json.",
        code: "UNSUPPORTED_MEDIA_TYPE",
        status: 415,
      });
    }
  });

  it("a body over BODY_LIMIT_BYTES is a 413 PAYLOAD_TOO_LARGE naming the limit and what to do", async () => {
    const res = await app.inject({
      method: "POST",
      url: "/auth/login",
      headers: { "content-type": "application/json" },
      payload: JSON.stringify({ username: "anna", password: "x".repeat(3000) }),
    });
    expect(res.statusCode).toBe(413);
    expect(res.json()).toEqual({
      error: "PayloadTooLarge",
      message: `The request body is over ${BODY_LIMIT} bytes, the most this route takes: send less or split a batch into smaller requests; for bulk data use POST /api/v4/core/{dim}/import (CSV or NDJSON).`,
      code: "PAYLOAD_TOO_LARGE",
      status: 413,
      details: { max_bytes: BODY_LIMIT },
    });
  });

  it("X-Request-ID is generated (a UUID) when absent and echoed when given", async () => {
    const a = await app.inject({ method: "GET", url: "/healthz" });
    const b = await app.inject({ method: "GET", url: "/healthz" });
    expect(a.headers["x-request-id"]).toMatch(UUID_RE);
    expect(b.headers["x-request-id"]).toMatch(UUID_RE);
    expect(a.headers["x-request-id"]).not.toBe(b.headers["x-request-id"]);
    const given = await app.inject({
      method: "GET",
      url: "/healthz",
      headers: { "x-request-id": "req-abc.123" },
    });
    expect(given.headers["x-request-id"]).toBe("req-abc.123");
    // On errors too.
    const nf = await app.inject({ method: "GET", url: "/nope", headers: { "x-request-id": "trace-404" } });
    expect(nf.statusCode).toBe(404);
    expect(nf.headers["x-request-id"]).toBe("trace-404");
    // An id that could smuggle text into logs or headers is replaced by a fresh UUID.
    for (const bad of ["has spaces", "x".repeat(200), 'quote"s']) {
      const res = await app.inject({ method: "GET", url: "/healthz", headers: { "x-request-id": bad } });
      expect(res.headers["x-request-id"]).toMatch(UUID_RE);
    }
  });

  it("an OPTIONS that is no preflight is a 204 with the allowed methods, not a text/plain 400", async () => {
    const res = await app.inject({ method: "OPTIONS", url: "/api/v4/core/CUST" });
    expect(res.statusCode).toBe(204);
    expect(res.body).toBe("");
    expect(String(res.headers["access-control-allow-methods"])).toContain("PATCH");
  });

  it("a CORS preflight answers with the allowed methods, headers and a max age of 86400", async () => {
    const res = await app.inject({
      method: "OPTIONS",
      url: "/api/v4/core/CUST",
      headers: {
        origin: "https://app.example",
        "access-control-request-method": "PATCH",
        "access-control-request-headers": "authorization,content-type",
      },
    });
    expect(res.statusCode).toBe(204);
    expect(res.headers["access-control-allow-origin"]).toBe("https://app.example");
    const methods = String(res.headers["access-control-allow-methods"])
      .split(",")
      .map((s) => s.trim());
    expect(methods).toEqual(expect.arrayContaining(["GET", "POST", "PUT", "PATCH", "DELETE"]));
    const headers = String(res.headers["access-control-allow-headers"])
      .split(",")
      .map((s) => s.trim().toLowerCase());
    expect(headers).toEqual(expect.arrayContaining(["authorization", "content-type"]));
    expect(res.headers["access-control-max-age"]).toBe("86400");
  });

  it("an actual cross-origin request carries the CORS headers and exposes X-Request-ID", async () => {
    const res = await app.inject({
      method: "GET",
      url: "/healthz",
      headers: { origin: "https://app.example" },
    });
    expect(res.headers["access-control-allow-origin"]).toBe("https://app.example");
    expect(String(res.headers["access-control-expose-headers"])).toContain("X-Request-ID");
  });

  /** Calls a route; when it asks for a token, checks the 401 body and calls again as anna. */
  async function getAsAnna(url: string) {
    const anon = await app.inject({ method: "GET", url });
    if (anon.statusCode !== 401) return anon;
    expect(anon.json()).toMatchObject({ error: "AuthenticationError", code: "TOKEN_MISSING", status: 401 });
    const token = await loginAs(app, "anna", "anna-secret-1", { source: "anag-1" });
    return app.inject({ method: "GET", url, headers: bearer(token) });
  }

  it("GET /api/v4/core/DIM/CUST answers the dimension's metadata", async () => {
    const res = await getAsAnna("/api/v4/core/DIM/CUST?source=anag-1");
    expect(res.statusCode).toBe(200);
    expect(res.json()).toEqual({
      data: {
        COD_DIM: "CUST",
        DESC_DIM: "Customers",
        TABLE_NAME: "TB_ANAG_CUST00",
        ID_FIELD: "CUST_ID",
        CASCADE_DELETE: "ADDR",
      },
    });
  });

  it("GET /api/v4/core/DIM/{unknown} is a 404 DIMENSION_NOT_FOUND (or 403 through a source of another dimension)", async () => {
    const res = await getAsAnna("/api/v4/core/DIM/NOPE?source=anag-1");
    expect([403, 404]).toContain(res.statusCode);
    expectStandardBody(
      res.json(),
      res.statusCode,
      res.statusCode === 404 ? "DIMENSION_NOT_FOUND" : "INSUFFICIENT_PERMISSIONS",
    );
  });

  it("a malformed URL is a 400 in the standard body, with a request id", async () => {
    const res = await app.inject({ method: "GET", url: "/api/v4/core/DIM/%E0%A4%A" });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: "BadRequest", code: "INVALID_REQUEST", status: 400 });
    expect(res.headers["x-request-id"]).toMatch(UUID_RE);
  });

  it("malformed URLs and odd input never give a 500", async () => {
    for (const url of [
      "/api/v4/core/DIM/%E0%A4%A",
      "/api/v4/core/DIM/%00",
      "/api/v4/core/DIM/CUST?source=%ZZ",
      `/api/v4/core/DIM/${"A".repeat(600)}`,
      "/healthz?x[y][z]=1&x=2&x=3",
      "//..%2f..%2fetc/passwd",
    ]) {
      const res = await app.inject({ method: "GET", url });
      expect(res.statusCode, url).toBeLessThan(500);
      if (res.statusCode >= 400) {
        const body = res.json();
        expect(body, url).toMatchObject({
          error: expect.any(String),
          message: expect.any(String),
          status: res.statusCode,
        });
        expect(body.code, url).toMatch(/^[A-Z_]+$/);
        expect(res.headers["x-request-id"], url).toMatch(UUID_RE);
      }
    }
  });
});

describe("mapError: every error becomes the standard body", () => {
  it("typed errors keep their status, code, type and extras", () => {
    expect(mapError(new NotFoundError("RECORD_NOT_FOUND", "gone"))).toEqual({
      status: 404,
      body: { error: "NotFound", message: "gone", code: "RECORD_NOT_FOUND", status: 404 },
    });
    expect(mapError(new BadRequestError("INVALID_FOREIGN_KEY", "bad fk", { field: "CITY_ID" })).body).toEqual(
      {
        error: "BadRequest",
        message: "bad fk",
        code: "INVALID_FOREIGN_KEY",
        status: 400,
        field: "CITY_ID",
      },
    );
    expect(
      mapError(new PermissionDeniedError("no", { extra: { required_grant: 2, user_grants: [] } })).body,
    ).toEqual({
      error: "PermissionDenied",
      message: "no",
      code: "INSUFFICIENT_PERMISSIONS",
      status: 403,
      required_grant: 2,
      user_grants: [],
    });
    const limited = mapError(new RateLimitError("slow down", { headers: { "Retry-After": "3" } }));
    expect(limited.status).toBe(429);
    expect(limited.headers).toEqual({ "Retry-After": "3" });
    expect(mapError(new ConflictError("DUPLICATE_KEY", "dup")).status).toBe(409);
    expect(mapError(new ApiError(422, "REQUIRED_FIELD_MISSING", "ValidationError", "x")).status).toBe(422);
  });

  it("MetadataError is 400 INVALID_METADATA with errors [{field, message}]", () => {
    const mapped = mapError(
      new MetadataError("2 problems", [
        { path: "TB_VAR[3].DATA_TYPE", message: "unknown" },
        { path: "TB_MENU[1]", message: "overlaps" },
      ]),
    );
    expect(mapped).toEqual({
      status: 400,
      body: {
        error: "ValidationError",
        message: "2 problems",
        code: "INVALID_METADATA",
        status: 400,
        errors: [
          { field: "TB_VAR[3].DATA_TYPE", message: "unknown" },
          { field: "TB_MENU[1]", message: "overlaps" },
        ],
      },
    });
  });

  it("an unreachable or restarting database is a 503 to retry, a cancelled slow query a 504", () => {
    for (const code of ["ECONNREFUSED", "ECONNRESET", "57P01", "08006", "53300"]) {
      const mapped = mapError(Object.assign(new Error("db down"), { code }));
      expect(mapped).toEqual({
        status: 503,
        body: {
          error: "ServiceUnavailable",
          message: "The database is not reachable right now; retry shortly.",
          code: "DATABASE_UNAVAILABLE",
          status: 503,
        },
        headers: { "Retry-After": "1" },
      });
    }
    const timeout = mapError(
      Object.assign(new Error("canceling statement due to statement timeout"), { code: "57014" }),
    );
    expect(timeout.status).toBe(504);
    expect(timeout.body).toMatchObject({ code: "QUERY_TIMEOUT", status: 504 });
    // Other SQLSTATEs are not the database being away nor the request's fault: still a 500.
    expect(mapError(Object.assign(new Error("x"), { code: "42601" })).status).toBe(500);
  });

  it("a deadlock is a 409 to retry; SQL meeting metadata that changed under it a 503 to retry", () => {
    for (const code of ["40P01", "40001"]) {
      expect(mapError(Object.assign(new Error("x"), { code }))).toEqual({
        status: 409,
        body: {
          error: "Conflict",
          message: "The change collided with a concurrent one and was not applied; retry it.",
          code: "WRITE_CONFLICT",
          status: 409,
        },
        headers: { "Retry-After": "1" },
      });
    }
    const cachedPlan = "cached plan must not change result type";
    expect(mapError(Object.assign(new Error("not supported"), { code: "0A000" })).status).toBe(500);
    for (const [code, message] of [
      ["42703", "x"],
      ["42P01", "x"],
      ["0A000", cachedPlan],
    ] as const) {
      const mapped = mapError(Object.assign(new Error(message), { code }));
      expect(mapped.status).toBe(503);
      expect(mapped.body.code).toBe("METADATA_CHANGED");
      expect(mapped.headers).toEqual({ "Retry-After": "1" });
    }
  });

  it("data exceptions (class 22) are a 400, integrity violations (class 23) a 409", () => {
    expect(mapError(Object.assign(new Error("x"), { code: "22021" }))).toMatchObject({
      status: 400,
      body: { code: "INVALID_FIELD_VALUE", status: 400, details: { sqlstate: "22021" } },
    });
    expect(mapError(Object.assign(new Error("x"), { code: "23505" })).body).toMatchObject({
      code: "DUPLICATE_KEY",
      status: 409,
    });
    expect(mapError(Object.assign(new Error("x"), { code: "23503" })).body).toMatchObject({
      code: "CONSTRAINT_VIOLATION",
      status: 409,
    });
    expect(mapError(Object.assign(new Error("x"), { code: "23502", column: "NAME" }))).toMatchObject({
      status: 422,
      body: { code: "REQUIRED_FIELD_MISSING", field: "NAME", status: 422 },
    });
  });

  it("an unexpected error is a 500 that quotes the request id and hides the cause", () => {
    const mapped = mapError(new Error("connection string postgres://secret@db"), "req-1");
    expect(mapped.status).toBe(500);
    expect(mapped.body).toEqual({
      error: "InternalError",
      message: "An unexpected error occurred; quote request id req-1 when reporting it.",
      code: "INTERNAL_ERROR",
      status: 500,
    });
    expect(mapError("a string").status).toBe(500);
    expect(mapError(null).status).toBe(500);
  });

  it("framework client errors keep a 4xx status", () => {
    const fe = (statusCode: number, code: string, message = "m") =>
      Object.assign(new Error(message), { statusCode, code });
    expect(mapError(fe(413, "FST_ERR_CTP_BODY_TOO_LARGE")).body).toEqual({
      error: "PayloadTooLarge",
      message:
        "The request body is too large: send less or split a batch into smaller requests; for bulk data use POST /api/v4/core/{dim}/import (CSV or NDJSON).",
      code: "PAYLOAD_TOO_LARGE",
      status: 413,
    });
    expect(mapError(fe(415, "FST_ERR_CTP_INVALID_MEDIA_TYPE")).body.code).toBe("UNSUPPORTED_MEDIA_TYPE");
    expect(mapError(fe(400, "FST_ERR_CTP_EMPTY_JSON_BODY")).body.code).toBe("INVALID_JSON");
    expect(mapError(fe(400, "FST_ERR_VALIDATION")).body.code).toBe("INVALID_REQUEST");
    expect(mapError(fe(404, "FST_ERR_NOT_FOUND"))).toMatchObject({
      status: 404,
      body: { code: "NOT_FOUND" },
    });
    expect(mapError(fe(408, "X"))).toMatchObject({ status: 408, body: { code: "REQUEST_TIMEOUT" } });
    expect(mapError(fe(418, "X"))).toMatchObject({ status: 400, body: { code: "INVALID_REQUEST" } });
    expect(mapError(fe(503, "X")).status).toBe(500);
  });
});

describe.each(BACKENDS)("readiness without a database on %s", (backend) => {
  it("/readyz answers 503 in the standard body when the database is closed", async () => {
    const services = await createTestServices(backend);
    const app = await buildApp(services);
    await app.ready();
    try {
      await services.close();
      const res = await app.inject({ method: "GET", url: "/readyz" });
      expect(res.statusCode).toBe(503);
      const body = res.json();
      expect(body).toMatchObject({
        error: "ServiceUnavailable",
        message: "The service is not ready.",
        code: "NOT_READY",
        status: 503,
      });
      expect(body.details.database).toMatch(/^unreachable/);
      expect(body.details.migrations).toBe("pending");
      // Liveness does not depend on the database.
      expect((await app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
    } finally {
      await app.close();
    }
  });
});

describe("readiness probe", () => {
  it("a readiness probe that throws is a 503, not a 500", async () => {
    const app = await buildHttpServer({
      config: loadConfig({ LOG_LEVEL: "silent" }),
      logger: createLogger("silent"),
      readiness: async () => {
        throw new Error("probe exploded");
      },
    });
    try {
      const res = await app.inject({ method: "GET", url: "/readyz" });
      expect(res.statusCode).toBe(503);
      expect(res.json()).toMatchObject({ code: "NOT_READY", details: { error: "probe exploded" } });
    } finally {
      await app.close();
    }
  });
});

describe("CORS_ORIGINS", () => {
  it("only the listed origins are allowed", async () => {
    const app = await buildHttpServer({
      config: loadConfig({ LOG_LEVEL: "silent", CORS_ORIGINS: "https://a.example, https://b.example" }),
      logger: createLogger("silent"),
      readiness: async () => ({}),
    });
    try {
      const preflight = (origin: string) =>
        app.inject({
          method: "OPTIONS",
          url: "/healthz",
          headers: { origin, "access-control-request-method": "GET" },
        });
      expect((await preflight("https://b.example")).headers["access-control-allow-origin"]).toBe(
        "https://b.example",
      );
      expect(
        (await preflight("https://evil.example")).headers["access-control-allow-origin"],
      ).toBeUndefined();
    } finally {
      await app.close();
    }
  });
});

describe("ROLE", () => {
  it("a backend role refuses every request without the gateway's secret (health checks excepted)", async () => {
    const services = await createTestServices("pglite", {
      fixture: "sample",
      env: { ROLE: "read", GATEWAY_SECRET: "the-shared-secret" },
    });
    const app = await buildApp(services);
    try {
      const direct = await app.inject({
        method: "POST",
        url: "/auth/login",
        payload: { username: "anna", password: "anna-secret-1" },
      });
      expect(direct.statusCode).toBe(403);
      expect(direct.json()).toMatchObject({ code: "GATEWAY_REQUIRED", status: 403 });
      const wrong = await app.inject({
        method: "GET",
        url: "/metrics",
        headers: { "x-gateway-secret": "nope" },
      });
      expect(wrong.statusCode).toBe(403);
      expect((await app.inject({ method: "GET", url: "/healthz" })).statusCode).toBe(200);
      const viaGateway = await app.inject({
        method: "POST",
        url: "/auth/login",
        headers: { "x-gateway-secret": "the-shared-secret" },
        payload: { username: "anna", password: "anna-secret-1" },
      });
      expect(viaGateway.statusCode).toBe(200);
    } finally {
      await app.close();
      await services.close();
    }
  });

  it("ROLE=gateway is not an app of its own services (it runs src/gateway)", async () => {
    const services = await createTestServices("pglite", {
      env: {
        ROLE: "gateway",
        GATEWAY_SECRET: "s",
        READ_BACKEND_URL: "http://127.0.0.1:1",
        WRITE_BACKEND_URL: "http://127.0.0.1:1",
        AUTH_BACKEND_URL: "http://127.0.0.1:1",
      },
    });
    try {
      await expect(buildApp(services)).rejects.toThrow(/ROLE: "gateway"/);
    } finally {
      await services.close();
    }
  });
});
