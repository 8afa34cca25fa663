// Refresh with rotation and reuse detection (decisions.md §7), logout in both shapes (spec 5.6),
// and the token validator with both bodies (spec 5.7).
import { createHash } from "node:crypto";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, UNLIMITED_ENV } from "../helpers/auth.ts";
import { eventually } from "../events/support.ts";
import { BACKENDS, createTestApp, manualClock, type TestApp } from "../helpers/env.ts";

describe.each(BACKENDS)("refresh, logout, validator (%s)", (backend) => {
  let t: TestApp;
  const clock = manualClock();

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", clock, env: UNLIMITED_ENV });
  });
  afterAll(async () => t?.close());

  async function login(username = "anna", password = "anna-secret-1") {
    const res = await t.app.inject({ method: "POST", url: "/auth/login", payload: { username, password } });
    expect(res.statusCode).toBe(200);
    const data = res.json().data as { access_token: string; refresh_token: string };
    return {
      access: data.access_token,
      refresh: data.refresh_token,
      sessionId: decodeJwt(data.access_token).sessionId as string,
    };
  }
  const refresh = (refresh_token: unknown) =>
    t.app.inject({ method: "POST", url: "/auth/refresh", payload: { refresh_token } as object });
  const me = (token: string) => t.app.inject({ method: "GET", url: "/auth/me", headers: bearer(token) });
  const sessionExists = async (sessionId: string) =>
    (await t.services.db.query(`SELECT 1 FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`, [sessionId]))
      .rows.length === 1;

  describe("refresh", () => {
    it("gives a new access token and a new refresh token for the same session", async () => {
      const s = await login();
      clock.advance(1000);
      const res = await refresh(s.refresh);
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({ status: "success", data: { token_type: "Bearer", expires_in: 900 } });
      expect(body.data.refresh_token).not.toBe(s.refresh);
      expect(decodeJwt(body.data.access_token)).toMatchObject({ sessionId: s.sessionId, user_id: "anna" });
      expect((await me(body.data.access_token)).statusCode).toBe(200);
    });

    it("stores refresh tokens hashed", async () => {
      const s = await login();
      const rows = await t.services.db.query<{ TOKEN_HASH: string }>(
        `SELECT "TOKEN_HASH" FROM "TB_REFRESH_TOKEN" WHERE "SESSION_ID" = $1`,
        [s.sessionId],
      );
      expect(rows.rows.map((r) => r.TOKEN_HASH)).toEqual([
        createHash("sha256").update(s.refresh).digest("hex"),
      ]);
    });

    it("a refresh token used twice revokes the session (reuse detection)", async () => {
      const s = await login();
      const first = await refresh(s.refresh);
      expect(first.statusCode).toBe(200);
      const rotated = first.json().data;

      const reuse = await refresh(s.refresh);
      expect(reuse.statusCode).toBe(401);
      expect(reuse.json()).toMatchObject({
        error: "AuthenticationError",
        code: "REFRESH_TOKEN_INVALID",
        status: 401,
      });
      expect(await sessionExists(s.sessionId)).toBe(false);
      expect((await me(rotated.access_token)).json().code).toBe("TOKEN_INVALID");
      expect((await refresh(rotated.refresh_token)).statusCode).toBe(401);
    });

    it("an unknown, missing or malformed refresh token is 401 REFRESH_TOKEN_INVALID", async () => {
      for (const token of ["nope", undefined, 12, ""]) {
        const res = await refresh(token);
        expect(res.statusCode, String(token)).toBe(401);
        expect(res.json().code).toBe("REFRESH_TOKEN_INVALID");
      }
      const notObject = await t.app.inject({
        method: "POST",
        url: "/auth/refresh",
        payload: [1] as unknown as object,
      });
      expect(notObject.statusCode).toBe(400);
    });

    it("a refresh token expires after 30 days", async () => {
      const s = await login();
      clock.advance(30 * 86400_000 + 1000);
      const res = await refresh(s.refresh);
      expect(res.statusCode).toBe(401);
      expect(res.json().code).toBe("REFRESH_TOKEN_INVALID");
    });

    it("an expired refresh token presented twice is not taken for reuse: the session lives on", async () => {
      const s = await login();
      clock.advance(30 * 86400_000 + 1000);
      await t.services.db.query(
        `UPDATE "TB_ANAG_SESSIONS00" SET "LAST_ACTIVITY" = $2 WHERE "SESSION_ID" = $1`,
        [s.sessionId, clock()],
      );
      for (let i = 0; i < 2; i++) {
        const res = await refresh(s.refresh);
        expect(res.statusCode).toBe(401);
        expect(res.json().message).toMatch(/expired/);
      }
      expect(await sessionExists(s.sessionId)).toBe(true);
    });

    it("revives a session expired by inactivity", async () => {
      const s = await login();
      clock.advance(61 * 60_000);
      expect((await me(s.access)).json().code).toBe("TOKEN_EXPIRED");
      const res = await refresh(s.refresh);
      expect(res.statusCode).toBe(200);
      expect((await me(res.json().data.access_token)).statusCode).toBe(200);
    });

    it("fails once the session row is deleted", async () => {
      const s = await login();
      await t.services.db.query(`DELETE FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`, [s.sessionId]);
      expect((await refresh(s.refresh)).json().code).toBe("REFRESH_TOKEN_INVALID");
    });
  });

  describe("logout", () => {
    it("POST /auth/logout deletes the session; its tokens stop working", async () => {
      const s = await login();
      const res = await t.app.inject({ method: "POST", url: "/auth/logout", headers: bearer(s.access) });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ status: "success", message: expect.any(String) });
      expect(await sessionExists(s.sessionId)).toBe(false);
      expect((await me(s.access)).json().code).toBe("TOKEN_INVALID");
      expect((await refresh(s.refresh)).json().code).toBe("REFRESH_TOKEN_INVALID");
      const again = await t.app.inject({ method: "POST", url: "/auth/logout", headers: bearer(s.access) });
      expect(again.statusCode).toBe(401);
      expect(again.json()).toMatchObject({
        code: "TOKEN_INVALID",
        status: 401,
        error: "AuthenticationError",
      });
    });

    it("GET /api/v4/auth/logout answers {status_code, message}", async () => {
      const s = await login("marco", "marco-secret-2");
      const res = await t.app.inject({
        method: "GET",
        url: "/api/v4/auth/logout",
        headers: { ...bearer(s.access), microservice: "msauth" },
      });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ status_code: 200, message: expect.any(String) });
      expect(await sessionExists(s.sessionId)).toBe(false);
      const again = await t.app.inject({
        method: "GET",
        url: "/api/v4/auth/logout",
        headers: { ...bearer(s.access), microservice: "msauth" },
      });
      expect(again.statusCode).toBe(401);
      expect(again.json()).toMatchObject({ status_code: 401, code: "TOKEN_INVALID", status: 401 });
      const missing = await t.app.inject({ method: "GET", url: "/api/v4/auth/logout" });
      expect(missing.json()).toMatchObject({ status_code: 401, code: "TOKEN_MISSING" });
    });

    it("logout works on a session idle-expired", async () => {
      const s = await login();
      clock.advance(61 * 60_000);
      const res = await t.app.inject({ method: "POST", url: "/auth/logout", headers: bearer(s.access) });
      expect(res.statusCode).toBe(200);
      expect(await sessionExists(s.sessionId)).toBe(false);
    });
  });

  describe("token validator", () => {
    const validate = (headers: Record<string, string>) =>
      t.app.inject({
        method: "GET",
        url: "/api/v4/auth/tokenvalidator",
        headers: { microservice: "msauth", ...headers },
      });

    it("a valid token: 200 {code 200, message 'Token is Valid'}", async () => {
      const s = await login();
      const res = await validate(bearer(s.access));
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ code: 200, message: "Token is Valid" });
    });

    it("an invalid, missing, revoked or idle-expired token: 401 {code 401, msg, status 401, message}", async () => {
      const s = await login();
      const revoked = await login();
      await t.services.db.query(`DELETE FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`, [
        revoked.sessionId,
      ]);
      // The session cache hears of the deletion by NOTIFY, within milliseconds.
      await eventually(async () => (await validate(bearer(revoked.access))).statusCode === 401, {
        timeoutMs: 3000,
      });
      const cases: Array<[Record<string, string>, string]> = [
        [bearer("x.y.z"), "TOKEN_INVALID"],
        [{}, "TOKEN_MISSING"],
        [bearer(revoked.access), "TOKEN_INVALID"],
      ];
      for (const [headers, reason] of cases) {
        const res = await validate(headers);
        expect(res.statusCode).toBe(401);
        const body = res.json();
        expect(body).toMatchObject({ code: 401, status: 401, reason });
        expect(body.msg).toMatch(/token is invalid/i);
        expect(body.message).toMatch(/token is invalid/i);
      }
      clock.advance(61 * 60_000);
      const idle = await validate(bearer(s.access));
      expect(idle.statusCode).toBe(401);
      expect(idle.json()).toMatchObject({ code: 401, status: 401, reason: "TOKEN_EXPIRED" });
    });
  });
});
