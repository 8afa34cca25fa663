// Rate limits (spec 8, config.rateLimit): headers on every authenticated response, 429 with
// retry_after/limit/remaining/reset, per user and per tenant, login attempts per IP and username;
// in memory, and through the real Redis when TEST_REDIS_URL is set (shared by two app instances).
import { randomBytes } from "node:crypto";
import type { FastifyInstance } from "fastify";
import { Redis } from "ioredis";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, buildAuthApp, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, TEST_REDIS_URL, type TestApp } from "../helpers/env.ts";
import type { Services } from "../../src/services.ts";

const LIMIT_ENV = {
  LOGIN_RATE_LIMIT_PER_USERNAME_PER_MINUTE: "20",
  RATE_LIMIT_USER_PER_SECOND: "0",
  RATE_LIMIT_USER_PER_MINUTE: "3",
  RATE_LIMIT_USER_PER_HOUR: "0",
  RATE_LIMIT_TENANT_PER_MINUTE: "0",
  RATE_LIMIT_TENANT_PER_HOUR: "6",
};

type Reply = Awaited<ReturnType<FastifyInstance["inject"]>>;

function limitHeaders(res: Reply) {
  return {
    limit: Number(res.headers["x-ratelimit-limit"]),
    remaining: Number(res.headers["x-ratelimit-remaining"]),
    reset: Number(res.headers["x-ratelimit-reset"]),
  };
}

function expect429(res: Reply, limit: number, windowS: number) {
  expect(res.statusCode).toBe(429);
  const body = res.json();
  const nowS = Date.now() / 1000;
  expect(body).toMatchObject({
    error: "RateLimitExceeded",
    code: "RATE_LIMIT_EXCEEDED",
    status: 429,
    limit,
    remaining: 0,
  });
  expect(body.retry_after).toBeGreaterThanOrEqual(1);
  expect(body.retry_after).toBeLessThanOrEqual(windowS);
  expect(body.reset).toBeGreaterThan(nowS);
  expect(body.reset).toBeLessThanOrEqual(Math.ceil(nowS) + windowS);
  expect(res.headers["retry-after"]).toBe(String(body.retry_after));
  expect(limitHeaders(res)).toEqual({ limit, remaining: 0, reset: body.reset });
}

/**
 * The per-user and per-tenant sequence: marco (acme) 3 allowed then 429 on the user window; lucia
 * (acme) sees the tenant window as closest to exhaustion; anna (acme) exhausts it; greta (globex)
 * is unaffected.
 */
async function userAndTenantSequence(app: FastifyInstance, tokens: Record<string, string>) {
  const me = (who: string) => app.inject({ method: "GET", url: "/auth/me", headers: bearer(tokens[who]!) });
  const first = await me("marco");
  expect(first.statusCode).toBe(200);
  const h = limitHeaders(first);
  expect(h).toMatchObject({ limit: 3, remaining: 2 });
  expect(h.reset).toBeGreaterThan(Date.now() / 1000);
  expect(h.reset).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60);
  expect(limitHeaders(await me("marco"))).toMatchObject({ limit: 3, remaining: 1 });
  expect(limitHeaders(await me("marco"))).toMatchObject({ limit: 3, remaining: 0 });
  expect429(await me("marco"), 3, 60);

  const lucia = await me("lucia");
  expect(lucia.statusCode).toBe(200);
  expect(limitHeaders(lucia)).toMatchObject({ limit: 6, remaining: 1 });
  const anna = await me("anna");
  expect(anna.statusCode).toBe(200);
  expect(limitHeaders(anna)).toMatchObject({ limit: 6, remaining: 0 });
  expect429(await me("anna"), 6, 3600);

  const greta = await me("greta");
  expect(greta.statusCode).toBe(200);
  expect(limitHeaders(greta)).toMatchObject({ limit: 3, remaining: 2 });
}

async function loginTokens(app: FastifyInstance) {
  return {
    marco: await loginAs(app, "marco", "marco-secret-2"),
    lucia: await loginAs(app, "lucia", "lucia-secret-3"),
    anna: await loginAs(app, "anna", "anna-secret-1"),
    greta: await loginAs(app, "greta", "greta-secret-4"),
  };
}

describe.each(BACKENDS)("rate limits (%s)", (backend) => {
  let t: TestApp;
  let loginApp: FastifyInstance;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: LIMIT_ENV });
    loginApp = await buildAuthApp(t.services, { login: { perIpPerMinute: 5, perUsernamePerMinute: 2 } });
  });
  afterAll(async () => {
    await loginApp?.close();
    await t?.close();
  });

  it("per user and per tenant, with headers on every response and a 429 body", async () => {
    await userAndTenantSequence(t.app, await loginTokens(t.app));
  });

  it("login responses carry the login limits' headers", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: "/auth/login",
      payload: { username: "marco", password: "wrong" },
      remoteAddress: "10.9.9.9",
    });
    expect(res.statusCode).toBe(401);
    expect(limitHeaders(res)).toMatchObject({ limit: 20, remaining: 18 });
  });

  it("the login limits come from LOGIN_RATE_LIMIT_PER_IP_PER_MINUTE / _PER_USERNAME_PER_MINUTE", async () => {
    const strict = await createTestApp(backend, {
      fixture: "sample",
      env: { LOGIN_RATE_LIMIT_PER_USERNAME_PER_MINUTE: "1", LOGIN_RATE_LIMIT_PER_IP_PER_MINUTE: "50" },
    });
    try {
      const attempt = () =>
        strict.app.inject({
          method: "POST",
          url: "/auth/login",
          payload: { username: "marco", password: "x" },
        });
      const first = await attempt();
      expect(first.statusCode).toBe(401);
      expect(limitHeaders(first)).toMatchObject({ limit: 1, remaining: 0 });
      expect429(await attempt(), 1, 60);
    } finally {
      await strict.close();
    }
  });

  it("login attempts are limited per username and per IP", async () => {
    const attempt = (username: string, ip: string) =>
      loginApp.inject({
        method: "POST",
        url: "/auth/login",
        payload: { username, password: "wrong" },
        remoteAddress: ip,
      });
    expect((await attempt("nobody-1", "10.0.0.1")).statusCode).toBe(401);
    expect((await attempt("nobody-1", "10.0.0.2")).statusCode).toBe(401);
    expect429(await attempt("nobody-1", "10.0.0.3"), 2, 60);
    expect429(await attempt("NOBODY-1", "10.0.0.4"), 2, 60);

    for (let i = 0; i < 5; i++) await attempt(`user-${i}`, "10.0.0.9");
    const blocked = await attempt("user-new", "10.0.0.9");
    expect429(blocked, 5, 60);
    expect((await attempt("user-new", "10.0.0.10")).statusCode).toBe(401);
  });

  it("refresh attempts count against the IP's login limit", async () => {
    for (let i = 0; i < 5; i++) {
      const res = await loginApp.inject({
        method: "POST",
        url: "/auth/refresh",
        payload: { refresh_token: "nope" },
        remoteAddress: "10.0.1.1",
      });
      expect(res.statusCode).toBe(401);
    }
    const res = await loginApp.inject({
      method: "POST",
      url: "/auth/refresh",
      payload: { refresh_token: "nope" },
      remoteAddress: "10.0.1.1",
    });
    expect429(res, 5, 60);
  });

  /** The same services with another REDIS_URL: what a process started with that setting gets. */
  const withRedis = (url: string): Services => ({
    ...t.services,
    config: { ...t.services.config, redisUrl: url },
  });

  describe("with Redis unreachable", () => {
    let app: FastifyInstance;
    beforeAll(async () => {
      app = await buildAuthApp(withRedis("redis://127.0.0.1:1"));
    });
    afterAll(async () => app?.close());

    it("falls back to memory counters and keeps serving", async () => {
      const token = await loginAs(app, "marco", "marco-secret-2");
      const me = () => app.inject({ method: "GET", url: "/auth/me", headers: bearer(token) });
      expect(limitHeaders(await me())).toMatchObject({ limit: 3, remaining: 2 });
      await me();
      await me();
      expect((await me()).statusCode).toBe(429);
    });
  });

  if (TEST_REDIS_URL) {
    const redisUrl = TEST_REDIS_URL;
    describe("through Redis", () => {
      let appA: FastifyInstance;
      let appB: FastifyInstance;
      let redis: Redis;
      const prefix = `dimensio:test:${randomBytes(6).toString("hex")}`;
      const clearKeys = async () => {
        const keys = await redis.keys(`${prefix}:*`);
        if (keys.length) await redis.del(...keys);
      };

      beforeAll(async () => {
        redis = new Redis(redisUrl);
        appA = await buildAuthApp(withRedis(redisUrl), { rateLimitPrefix: prefix });
        appB = await buildAuthApp(withRedis(redisUrl), { rateLimitPrefix: prefix });
      });
      afterAll(async () => {
        await appA?.close();
        await appB?.close();
        if (redis) {
          await clearKeys();
          await redis.quit();
        }
      });

      it("two instances share the counters held in Redis", async () => {
        const token = await loginAs(appA, "marco", "marco-secret-2");
        const me = (app: FastifyInstance) =>
          app.inject({ method: "GET", url: "/auth/me", headers: bearer(token) });
        expect(limitHeaders(await me(appA))).toMatchObject({ limit: 3, remaining: 2 });
        expect(limitHeaders(await me(appB))).toMatchObject({ limit: 3, remaining: 1 });
        expect(limitHeaders(await me(appA))).toMatchObject({ limit: 3, remaining: 0 });
        expect429(await me(appB), 3, 60);
        expect(Number(await redis.get(`${prefix}:user:min:marco`))).toBe(4);
        expect(Number(await redis.get(`${prefix}:tenant:h:acme`))).toBe(4);
      });

      it("per user and per tenant through Redis", async () => {
        await clearKeys();
        await userAndTenantSequence(appB, await loginTokens(appA));
      });
    });
  }
});

describe.each(BACKENDS)("rate-limit headers on answers without a user (%s)", (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: { RATE_LIMIT_ANONYMOUS_PER_MINUTE: "3" } });
  });
  afterAll(async () => {
    await t?.close();
  });
  const call = (url: string, ip: string, headers: Record<string, string> = {}) =>
    t.app.inject({ url, remoteAddress: ip, headers });

  it("health checks show the IP's window without spending it", async () => {
    const first = await call("/healthz", "10.1.0.1");
    expect(first.statusCode).toBe(200);
    expect(limitHeaders(first)).toMatchObject({ limit: 3, remaining: 3 });
    expect(limitHeaders(await call("/readyz", "10.1.0.1"))).toMatchObject({ limit: 3, remaining: 3 });
  });

  it("calls without a token spend the IP's window: 401s carry the headers, then 429", async () => {
    for (const remaining of [2, 1, 0]) {
      const res = await call("/api/v4/core/CUST?source=anag-1", "10.1.0.2");
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ code: "TOKEN_MISSING", status: 401 });
      expect(limitHeaders(res)).toMatchObject({ limit: 3, remaining });
    }
    expect429(await call("/api/v4/core/CUST?source=anag-1", "10.1.0.2"), 3, 60);
    // Another address has its own window.
    expect((await call("/api/v4/core/CUST?source=anag-1", "10.1.0.3")).statusCode).toBe(401);
  });

  it("bad tokens spend the IP's window too (Bearer junk, Basic, the validator): then 429", async () => {
    const headers = [{ authorization: "Bearer x.y.z" }, { authorization: "Basic dXNlcjpwdw==" }];
    for (const [i, h] of headers.entries()) {
      const res = await call("/api/v4/core/CUST?source=anag-1", "10.1.0.4", h);
      expect(res.statusCode).toBe(401);
      expect(limitHeaders(res)).toMatchObject({ limit: 3, remaining: 2 - i });
      expect(limitHeaders(res).reset).toBeGreaterThan(Date.now() / 1000);
    }
    const validator = await call("/api/v4/auth/tokenvalidator", "10.1.0.4", {
      authorization: "Bearer x.y.z",
    });
    expect(validator.statusCode).toBe(401);
    expect(validator.json()).toMatchObject({ code: 401, status: 401 });
    expect429(
      await call("/api/v4/core/CUST?source=anag-1", "10.1.0.4", { authorization: "Bearer x.y.z" }),
      3,
      60,
    );
  });

  it("public media, served without a token, spends the IP's window too: then 429", async () => {
    const url = "/api/v4/media/public/PROD/P0001/IMAGE?tenant=acme";
    for (const remaining of [2, 1, 0]) {
      const res = await call(url, "10.1.0.7");
      expect(res.statusCode).toBe(404); // no public file there: a probe spends as much as a hit
      expect(limitHeaders(res)).toMatchObject({ limit: 3, remaining });
    }
    expect429(await call(url, "10.1.0.7"), 3, 60);
  });

  it("answers no window covered (an unknown route) show the IP's window without spending it", async () => {
    for (let i = 0; i < 4; i++) {
      const res = await call("/no/such/route", "10.1.0.6");
      expect(res.statusCode).toBe(404);
      expect(limitHeaders(res)).toMatchObject({ limit: 3, remaining: 3 });
    }
  });

  it("an authenticated answer shows the user's window instead", async () => {
    const token = await loginAs(t.app, "marco", "marco-secret-2");
    const res = await call("/api/v4/core/CUST?source=anag-1", "10.1.0.5", bearer(token));
    expect(res.statusCode).toBe(200);
    expect(limitHeaders(res).limit).toBe(10);
  });
});

describe.each(BACKENDS)("the token validator spends the user's window (%s)", (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: { RATE_LIMIT_USER_PER_MINUTE: "2" } });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("valid-token checks count like any request: headers, then 429", async () => {
    const token = await loginAs(t.app, "lucia", "lucia-secret-3");
    const check = () =>
      t.app.inject({
        url: "/api/v4/auth/tokenvalidator",
        headers: { ...bearer(token), microservice: "msauth" },
      });
    const first = await check();
    expect(first.statusCode).toBe(200);
    expect(first.json()).toEqual({ code: 200, message: "Token is Valid" });
    expect(limitHeaders(first)).toMatchObject({ limit: 2, remaining: 1 });
    expect((await check()).statusCode).toBe(200);
    expect429(await check(), 2, 60);
  });
});
