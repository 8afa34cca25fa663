// A login's source names the security area (TB_MENU) of its session's context (spec 4.1, 5.2):
// one the user could go through in no request is refused as that request is (403
// INSUFFICIENT_PERMISSIONS, details.reason unknown_source or no_grant_covers_source), after the
// credentials and before any session exists. Before, any text was taken into the session, the
// token's `source` claim and `modulo`.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { epoch, rsaKeysWithJwksFile, signRs256, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, manualClock, type TestApp } from "../helpers/env.ts";

describe.each(BACKENDS)("a login's source (%s)", (backend) => {
  let t: TestApp;
  let keys: Awaited<ReturnType<typeof rsaKeysWithJwksFile>>;
  const clock = manualClock();

  beforeAll(async () => {
    keys = await rsaKeysWithJwksFile();
    t = await createTestApp(backend, {
      fixture: "sample",
      clock,
      env: { ...UNLIMITED_ENV, JWT_PUBLIC_KEYS: keys.jwksFile },
    });
  });
  afterAll(async () => t?.close());

  const post = (url: string, payload: object) => t.app.inject({ method: "POST", url, payload });
  const sessions = async (user: string) =>
    Number(
      (
        await t.services.db.query<{ n: string }>(
          `SELECT count(*) AS n FROM "TB_ANAG_SESSIONS00" WHERE "USER_ID" = $1`,
          [user],
        )
      ).rows[0]!.n,
    );

  it("a source that names no security area is refused like a request through it, and opens no session", async () => {
    for (const source of ["anag-99", "not a code!"]) {
      const before = await sessions("anna");
      const res = await post("/auth/login", { username: "anna", password: "anna-secret-1", source });
      expect(res.statusCode, source).toBe(403);
      expect(res.json()).toMatchObject({
        code: "INSUFFICIENT_PERMISSIONS",
        status: 403,
        message: `Source ${source} is not a security area (TB_MENU).`,
        details: { reason: "unknown_source", source },
      });
      expect(await sessions("anna")).toBe(before);
    }
  });

  it("a security area no grant of the user covers is refused, naming the reason", async () => {
    const res = await post("/auth/login", {
      username: "lucia",
      password: "lucia-secret-3",
      source: "catalog-1",
    });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      details: { reason: "no_grant_covers_source", source: "catalog-1" },
    });
  });

  it("the user's own areas are taken, a grouping node too, and so is naming none", async () => {
    const own = await post("/auth/login", {
      username: "lucia",
      password: "lucia-secret-3",
      source: "sales-1",
    });
    expect(own.statusCode).toBe(200);
    expect(own.json().data.user.source).toBe("sales-1");
    const grouping = await post("/auth/login", {
      username: "marco",
      password: "marco-secret-2",
      source: "anag",
    });
    expect(grouping.statusCode).toBe(200);
    expect(grouping.json().data.user.source).toBe("anag");
    const none = await post("/auth/login", { username: "lucia", password: "lucia-secret-3" });
    expect(none.statusCode).toBe(200);
    expect(none.json().data.user.source).toBeNull();
  });

  it("the credentials are checked first: a wrong password with an unknown source stays 401", async () => {
    const res = await post("/auth/login", { username: "anna", password: "wrong", source: "anag-99" });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe("INVALID_CREDENTIALS");
    await t.services.db.query(`UPDATE "TB_USER" SET "FAILED_LOGINS" = 0 WHERE "USER_ID" = 'anna'`);
  });

  it("variant B's resource and a token exchange's resource stand for the source, and are checked the same way", async () => {
    const b = await post("/api/v4/auth/login", {
      resource: "nowhere",
      tenantId: "acme",
      uuid: "device-1",
      username: "marco",
      password: "marco-secret-2",
    });
    expect(b.statusCode).toBe(403);
    expect(b.json()).toMatchObject({
      code: "INSUFFICIENT_PERMISSIONS",
      details: { reason: "unknown_source" },
    });
    const external = await signRs256(
      keys.privateKey,
      { sub: "lucia", tenant_id: "acme" },
      { now: epoch(clock()) },
    );
    const exchange = await post("/auth/login", {
      access_token: external,
      resource: "catalog-1",
      tenantId: "acme",
    });
    expect(exchange.statusCode).toBe(403);
    expect(exchange.json()).toMatchObject({ details: { reason: "no_grant_covers_source" } });
  });
});
