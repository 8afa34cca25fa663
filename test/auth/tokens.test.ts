// Access-token validation (spec 5.1.3, 7.2), sessions behind tokens (revocation, idle expiry,
// renewal in X-Access-Token), and grants read from the session rather than the token.
import { createHash } from "node:crypto";
import { decodeJwt, exportSPKI, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, epoch, loginAs, rsaKeysWithJwksFile, signRs256, UNLIMITED_ENV } from "../helpers/auth.ts";
import { eventually } from "../events/support.ts";
import { BACKENDS, createTestApp, manualClock, TEST_JWT_SECRET, type TestApp } from "../helpers/env.ts";

// Changes made in the database directly reach the session cache by NOTIFY (milliseconds): the
// next requests are awaited for a moment, well below the cache's lifetime (60 s in these apps).
const NOTICE_MS = 3000;
async function soon<T>(read: () => Promise<T>, accept: (v: T) => boolean): Promise<T> {
  let last: T | undefined;
  try {
    return await eventually(
      async () => {
        last = await read();
        return accept(last) ? last : undefined;
      },
      { timeoutMs: NOTICE_MS, what: "the session cache to hear of the change" },
    );
  } catch {
    return last as T;
  }
}

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");

describe.each(BACKENDS)("access tokens (%s)", (backend) => {
  let t: TestApp;
  let keys: Awaited<ReturnType<typeof rsaKeysWithJwksFile>>;
  const clock = manualClock();
  const secret = new TextEncoder().encode(TEST_JWT_SECRET);

  beforeAll(async () => {
    keys = await rsaKeysWithJwksFile();
    t = await createTestApp(backend, {
      fixture: "sample",
      clock,
      env: { ...UNLIMITED_ENV, JWT_PUBLIC_KEYS: keys.jwksFile, SESSION_CACHE_MS: "60000" },
    });
  });
  afterAll(async () => t?.close());

  const me = (headers: Record<string, string> = {}, query = "") =>
    t.app.inject({ method: "GET", url: `/auth/me${query}`, headers });

  async function session() {
    const token = await loginAs(t.app, "marco", "marco-secret-2");
    return { token, sessionId: decodeJwt(token).sessionId as string };
  }

  /** An HS256 token with this service's secret and the given claims over valid defaults. */
  async function forge(sessionId: string, over: Record<string, unknown> = {}) {
    const now = epoch(clock());
    const claims = {
      iss: "dimensio",
      aud: "dimensio",
      sub: "marco",
      user_id: "marco",
      tenant_id: "acme",
      sessionId,
      iat: now,
      nbf: now,
      exp: now + 600,
      ...over,
    };
    return new SignJWT(claims).setProtectedHeader({ alg: "HS256", typ: "JWT" }).sign(secret);
  }

  function expect401(res: { statusCode: number; json(): unknown }, code: string) {
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ error: "AuthenticationError", code, status: 401 });
  }

  it("a valid token passes", async () => {
    const { token } = await session();
    const res = await me(bearer(token));
    expect(res.statusCode).toBe(200);
    expect(res.json().data.user_id).toBe("marco");
  });

  it("a missing or malformed Authorization header is refused", async () => {
    expect401(await me(), "TOKEN_MISSING");
    expect401(await me({ authorization: "" }), "TOKEN_MISSING");
    expect401(await me({ authorization: "Bearer" }), "TOKEN_MISSING");
    expect401(await me({ authorization: "Basic YW5uYTpwdw==" }), "TOKEN_INVALID");
    expect401(await me({ authorization: "Bearer a.b" }), "TOKEN_INVALID");
    expect401(await me({ authorization: "Bearer a.b.c" }), "TOKEN_INVALID");
    expect401(await me({ authorization: "Bearer one two" }), "TOKEN_INVALID");
  });

  it("a token in the query string is never read", async () => {
    const { token } = await session();
    expect401(await me({}, `?access_token=${token}&token=${token}`), "TOKEN_MISSING");
  });

  it("alg none is refused", async () => {
    const { sessionId } = await session();
    const now = epoch(clock());
    const payload = b64({ iss: "dimensio", sub: "marco", sessionId, iat: now, exp: now + 600 });
    expect401(await me(bearer(`${b64({ alg: "none", typ: "JWT" })}.${payload}.`)), "TOKEN_INVALID");
    expect401(await me(bearer(`${b64({ alg: "none", typ: "JWT" })}.${payload}.c2ln`)), "TOKEN_INVALID");
  });

  it("an HS256 token signed with the RS256 public key is refused", async () => {
    const { sessionId } = await session();
    const pem = new TextEncoder().encode(await exportSPKI(keys.publicKey));
    const now = epoch(clock());
    const forged = await new SignJWT({ iss: "dimensio", sub: "marco", sessionId, iat: now, exp: now + 600 })
      .setProtectedHeader({ alg: "HS256", typ: "JWT" })
      .sign(pem);
    expect401(await me(bearer(forged)), "TOKEN_INVALID");
  });

  it("a tampered payload fails the signature", async () => {
    const { token } = await session();
    const [h, , s] = token.split(".");
    const claims = decodeJwt(token);
    const tampered = `${h}.${b64({ ...claims, user_id: "anna", sub: "anna" })}.${s}`;
    expect401(await me(bearer(tampered)), "TOKEN_INVALID");
  });

  it("a wrong iss and a future nbf are refused", async () => {
    const { sessionId } = await session();
    expect401(await me(bearer(await forge(sessionId, { iss: "evil" }))), "TOKEN_INVALID");
    expect401(await me(bearer(await forge(sessionId, { nbf: epoch(clock()) + 60 }))), "TOKEN_INVALID");
    expect((await me(bearer(await forge(sessionId)))).statusCode).toBe(200);
  });

  it("an expired token is TOKEN_EXPIRED with expired_at", async () => {
    const { sessionId } = await session();
    const exp = epoch(clock()) - 5;
    const res = await me(bearer(await forge(sessionId, { exp })));
    expect401(res, "TOKEN_EXPIRED");
    expect(res.json().expired_at).toBe(new Date(exp * 1000).toISOString());
  });

  it("a token whose claims contradict its session is refused", async () => {
    const { sessionId } = await session();
    expect401(await me(bearer(await forge(sessionId, { user_id: "anna", sub: "anna" }))), "TOKEN_INVALID");
    expect401(await me(bearer(await forge(sessionId, { tenant_id: "globex" }))), "TOKEN_INVALID");
    expect401(await me(bearer(await forge("00000000-0000-0000-0000-000000000000"))), "TOKEN_INVALID");
  });

  it("an RS256 token of JWT_PUBLIC_KEYS with a sessionId is accepted; with another issuer it is not", async () => {
    const { sessionId } = await session();
    const now = epoch(clock());
    const rs = await signRs256(keys.privateKey, { iss: "dimensio", aud: "dimensio", sessionId }, { now });
    const res = await me(bearer(rs));
    expect(res.statusCode).toBe(200);
    expect(res.json().data).toMatchObject({ user_id: "marco", tenant_id: "acme", session_id: sessionId });
    const wrongIss = await signRs256(keys.privateKey, { iss: "elsewhere", sessionId }, { now });
    expect401(await me(bearer(wrongIss)), "TOKEN_INVALID");
    const other = await rsaKeysWithJwksFile();
    const unknownKey = await signRs256(other.privateKey, { iss: "dimensio", sessionId }, { now });
    expect401(await me(bearer(unknownKey)), "TOKEN_INVALID");
  });

  it("deleting the session row revokes its tokens at once", async () => {
    const { token, sessionId } = await session();
    expect((await me(bearer(token))).statusCode).toBe(200);
    await t.services.db.query(`DELETE FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`, [sessionId]);
    expect401(
      await soon(
        () => me(bearer(token)),
        (r) => r.statusCode === 401,
      ),
      "TOKEN_INVALID",
    );
  });

  it("deactivating the user ends the user's sessions, for good: reactivating revives none", async () => {
    const token = await loginAs(t.app, "lucia", "lucia-secret-3");
    const sessionId = decodeJwt(token).sessionId as string;
    expect((await me(bearer(token))).statusCode).toBe(200);
    await t.services.db.query(`UPDATE "TB_USER" SET "ACTIVE" = false WHERE "USER_ID" = 'lucia'`);
    try {
      expect401(
        await soon(
          () => me(bearer(token)),
          (r) => r.statusCode === 401,
        ),
        "TOKEN_INVALID",
      );
    } finally {
      await t.services.db.query(`UPDATE "TB_USER" SET "ACTIVE" = true WHERE "USER_ID" = 'lucia'`);
    }
    expect401(await me(bearer(token)), "TOKEN_INVALID");
    const rows = await t.services.db.query(`SELECT 1 FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`, [
      sessionId,
    ]);
    expect(rows.rows).toEqual([]);
  });

  it("a grant change in the database applies on the next request with the same token", async () => {
    const token = await loginAs(t.app, "lucia", "lucia-secret-3");
    const sessionId = decodeJwt(token).sessionId as string;
    const grantsOf = async () =>
      (await me(bearer(token))).json().data.grants.map((g: { COD_MENU: string }) => g.COD_MENU);
    expect(await grantsOf()).toEqual(["anag-1", "sales-1"]);

    await t.services.db.query(
      `INSERT INTO "TB_USER_GRANT" ("USER_ID", "COD_MENU", "OPERATIONS", "LEVEL") VALUES ('lucia', 'catalog', '{read}', 1)`,
    );
    expect(await soon(grantsOf, (g) => g.length === 3)).toEqual(["anag-1", "catalog", "sales-1"]);
    const row = await t.services.db.query<{
      GRANTS: Array<{ COD_MENU: string }>;
      INTERFACE_DATA: { boxes: unknown[] };
    }>(`SELECT "GRANTS", "INTERFACE_DATA" FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`, [sessionId]);
    expect(row.rows[0]!.GRANTS.map((g) => g.COD_MENU)).toEqual(["anag-1", "catalog", "sales-1"]);
    expect(row.rows[0]!.INTERFACE_DATA.boxes).toHaveLength(4);

    await t.services.db.query(
      `DELETE FROM "TB_USER_GRANT" WHERE "USER_ID" = 'lucia' AND "COD_MENU" <> 'anag-1'`,
    );
    expect(await soon(grantsOf, (g) => g.length === 1)).toEqual(["anag-1"]);
    await t.services.db.query(
      `INSERT INTO "TB_USER_GRANT" ("USER_ID", "COD_MENU", "OPERATIONS", "LEVEL") VALUES ('lucia', 'sales-1', '{read}', 1)`,
    );
    expect(await soon(grantsOf, (g) => g.length === 2)).toEqual(["anag-1", "sales-1"]);
  });

  it("a peso change in TB_USER applies on the next request", async () => {
    const token = await loginAs(t.app, "lucia", "lucia-secret-3");
    expect((await me(bearer(token))).json().data.peso).toBe("3");
    await t.services.db.query(`UPDATE "TB_USER" SET "PESO" = '2' WHERE "USER_ID" = 'lucia'`);
    try {
      const seen = await soon(
        () => me(bearer(token)),
        (r) => r.json().data.peso === "2",
      );
      expect(seen.json().data.peso).toBe("2");
      const row = await t.services.db.query<{ CONTEXT: { peso: string } }>(
        `SELECT "CONTEXT" FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`,
        [decodeJwt(token).sessionId],
      );
      expect(row.rows[0]!.CONTEXT.peso).toBe("2");
    } finally {
      await t.services.db.query(`UPDATE "TB_USER" SET "PESO" = '3' WHERE "USER_ID" = 'lucia'`);
    }
  });

  it("grants edited in the session row apply on the next request", async () => {
    const token = await loginAs(t.app, "marco", "marco-secret-2");
    const sessionId = decodeJwt(token).sessionId as string;
    const grants = [{ COD_MENU: "anag-1", NLEFT: 3, NRIGHT: 4, OPERATIONS: ["read"], LEVEL: 1 }];
    expect((await me(bearer(token))).json().data.grants).not.toEqual(grants);
    await t.services.db.query(
      `UPDATE "TB_ANAG_SESSIONS00" SET "GRANTS" = $2::jsonb WHERE "SESSION_ID" = $1`,
      [sessionId, JSON.stringify(grants)],
    );
    const seen = await soon(
      () => me(bearer(token)),
      (r) => JSON.stringify(r.json().data.grants) === JSON.stringify(grants),
    );
    expect(seen.json().data.grants).toEqual(grants);
  });

  describe("idle expiry and renewal", () => {
    const lastActivity = async (sessionId: string) => {
      const res = await t.services.db.query<{ LAST_ACTIVITY: Date | string }>(
        `SELECT "LAST_ACTIVITY" FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`,
        [sessionId],
      );
      return new Date(res.rows[0]!.LAST_ACTIVITY).getTime();
    };

    it("a token younger than 15 minutes gets no new token", async () => {
      const { token } = await session();
      clock.advance(14 * 60_000);
      const res = await me(bearer(token));
      expect(res.statusCode).toBe(200);
      expect(res.headers["x-access-token"]).toBeUndefined();
    });

    it("after 15 minutes the response carries a fresh token in X-Access-Token", async () => {
      const { token, sessionId } = await session();
      clock.advance(16 * 60_000);
      const res = await me(bearer(token));
      expect(res.statusCode).toBe(200);
      const fresh = res.headers["x-access-token"] as string;
      expect(typeof fresh).toBe("string");
      const claims = decodeJwt(fresh);
      expect(claims).toMatchObject({ sessionId, user_id: "marco", iat: epoch(clock()) });
      expect(await lastActivity(sessionId)).toBe(clock().getTime());
      const again = await me(bearer(fresh));
      expect(again.statusCode).toBe(200);
      expect(again.headers["x-access-token"]).toBeUndefined();
    });

    it("LAST_ACTIVITY is written at most once every 30 seconds", async () => {
      const { token, sessionId } = await session();
      const start = clock().getTime();
      clock.advance(10_000);
      await me(bearer(token));
      expect(await lastActivity(sessionId)).toBe(start);
      clock.advance(25_000);
      await me(bearer(token));
      expect(await lastActivity(sessionId)).toBe(clock().getTime());
    });

    it("a session idle for 60 minutes is TOKEN_EXPIRED, with expired_at", async () => {
      const { token, sessionId } = await session();
      const start = clock().getTime();
      clock.advance(60 * 60_000 + 1000);
      const res = await me(bearer(token));
      expect401(res, "TOKEN_EXPIRED");
      expect(res.json().expired_at).toBe(new Date(start + 3600_000).toISOString());
      expect(await lastActivity(sessionId)).toBe(start);
    });

    it("a session in use stays alive, but a token older than 75 minutes has expired", async () => {
      const { token } = await session();
      let current = token;
      for (let i = 0; i < 5; i++) {
        clock.advance(16 * 60_000);
        const res = await me(bearer(current));
        expect(res.statusCode).toBe(200);
        current = (res.headers["x-access-token"] as string) ?? current;
      }
      const old = await me(bearer(token));
      expect401(old, "TOKEN_EXPIRED");
      expect(old.json().expired_at).toBe(new Date((decodeJwt(token).exp as number) * 1000).toISOString());
      expect((await me(bearer(current))).statusCode).toBe(200);
    });
  });

  it("the token does not carry grants or secrets", async () => {
    const { token } = await session();
    const claims = decodeJwt(token);
    expect(claims.grants).toBeUndefined();
    expect(JSON.stringify(claims)).not.toContain(createHash("sha256").update("marco-secret-2").digest("hex"));
    expect(JSON.stringify(claims)).not.toContain("marco-secret-2");
  });
});
