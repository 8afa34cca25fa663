// Login variants A and B (spec 5.3, 5.4), token exchange, the three login phases stored in the
// session row, failure bodies, and the lock after repeated failures (per address: lockout.test.ts).
import { DUMMY_HASH } from "../../src/auth/passwords.ts";
import { decodeJwt, decodeProtectedHeader } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  bearer,
  epoch,
  loginAs,
  rsaKeysWithJwksFile,
  SAMPLE_USERS,
  signRs256,
  UNLIMITED_ENV,
} from "../helpers/auth.ts";
import { BACKENDS, createTestApp, manualClock, type TestApp } from "../helpers/env.ts";

const FIXTURE_GRANTS = {
  anna: [
    {
      COD_MENU: "erp",
      NLEFT: 1,
      NRIGHT: 22,
      OPERATIONS: ["read", "write", "force_delete", "metadata"],
      LEVEL: 4,
    },
    { COD_MENU: "price-1", NLEFT: 23, NRIGHT: 24, OPERATIONS: ["read", "write"], LEVEL: 4 },
  ],
  marco: [
    { COD_MENU: "anag", NLEFT: 2, NRIGHT: 9, OPERATIONS: ["read", "write"], LEVEL: 3 },
    { COD_MENU: "catalog", NLEFT: 10, NRIGHT: 15, OPERATIONS: ["read"], LEVEL: 1 },
    { COD_MENU: "sales", NLEFT: 16, NRIGHT: 21, OPERATIONS: ["read", "write"], LEVEL: 2 },
  ],
  lucia: [
    { COD_MENU: "anag-1", NLEFT: 3, NRIGHT: 4, OPERATIONS: ["read"], LEVEL: 1 },
    { COD_MENU: "sales-1", NLEFT: 17, NRIGHT: 18, OPERATIONS: ["read"], LEVEL: 1 },
  ],
  greta: [{ COD_MENU: "erp", NLEFT: 1, NRIGHT: 22, OPERATIONS: ["read", "write", "force_delete"], LEVEL: 4 }],
};

const FIXTURE_PROFILE = {
  anna: { tenant_id: "acme", peso: "1", centro_dett: "HQ" },
  marco: { tenant_id: "acme", peso: "2", centro_dett: "MI01" },
  lucia: { tenant_id: "acme", peso: "3", centro_dett: "MI01" },
  greta: { tenant_id: "globex", peso: "1", centro_dett: "HQ" },
};

describe.each(BACKENDS)("login (%s)", (backend) => {
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

  const post = (url: string, payload: unknown) =>
    t.app.inject({ method: "POST", url, payload: payload as object });

  async function sessionRow(sessionId: string) {
    const res = await t.services.db.query<Record<string, unknown>>(
      `SELECT * FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`,
      [sessionId],
    );
    return res.rows[0];
  }

  it("variant A: credentials give tokens, the user block, and one session row", async () => {
    const res = await post("/auth/login", {
      username: "anna",
      password: "anna-secret-1",
      source: "anag-1",
      centro_dett: "HQ",
    });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({
      status: "success",
      data: {
        token_type: "Bearer",
        expires_in: 900,
        user: { user_id: "anna", tenant_id: "acme", source: "anag-1", centro_dett: "HQ", peso: "1" },
      },
    });
    expect(body.data.user.grants).toEqual(FIXTURE_GRANTS.anna);
    expect(typeof body.data.refresh_token).toBe("string");
    expect(JSON.stringify(body)).not.toMatch(/scrypt|secret-1/);

    const header = decodeProtectedHeader(body.data.access_token);
    expect(header).toMatchObject({ alg: "HS256", typ: "JWT" });
    const claims = decodeJwt(body.data.access_token);
    expect(claims).toMatchObject({
      iss: "dimensio",
      sub: "anna",
      aud: "dimensio",
      user_id: "anna",
      tenant_id: "acme",
      source: "anag-1",
      centro_dett: "HQ",
      peso: "1",
      ambiente: "production",
      lingua: "it",
    });
    expect(claims.exp! - claims.iat!).toBe(900 + 3600);
    expect(claims.nbf).toBe(claims.iat);
    expect(claims.iat).toBe(epoch(clock()));
    expect(typeof claims.jti).toBe("string");
    expect(claims.grants).toBeUndefined();

    const row = await sessionRow(claims.sessionId as string);
    expect(row).toBeDefined();
    expect(row!.USER_ID).toBe("anna");
    expect(row!.TENANT_ID).toBe("acme");
    expect(row!.GRANTS).toEqual(FIXTURE_GRANTS.anna);
    expect(row!.CONTEXT).toMatchObject({
      source: "anag-1",
      peso: "1",
      ambiente: "production",
      centro_dett: "HQ",
      lingua: "it",
      modulo: "anag",
    });
    expect(new Date(row!.LAST_ACTIVITY as string).getTime()).toBe(clock().getTime());
    expect(new Date(row!.EXPIRES_AT as string).getTime()).toBe(clock().getTime() + 3600_000);
  });

  it("a login naming a centro_dett that is not the user's own is 403, no session; the user's own or none is 200", async () => {
    const sessions = async () =>
      Number(
        (
          await t.services.db.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "TB_ANAG_SESSIONS00" WHERE "USER_ID" = 'lucia'`,
          )
        ).rows[0]!.n,
      );
    const before = await sessions();
    for (const other of ["HQ", "mi01", "NOWHERE"]) {
      const res = await post("/auth/login", {
        username: "lucia",
        password: "lucia-secret-3",
        centro_dett: other,
      });
      expect(res.statusCode, other).toBe(403);
      expect(res.json(), other).toMatchObject({
        code: "INSUFFICIENT_PERMISSIONS",
        status: 403,
        field: "centro_dett",
        details: { reason: "centro_dett_not_own", centro_dett: other },
      });
    }
    // A wrong password says nothing about the unit: 401 as ever.
    const wrong = await post("/auth/login", { username: "lucia", password: "nope", centro_dett: "HQ" });
    expect(wrong.statusCode).toBe(401);
    expect(await sessions()).toBe(before);
    // Token exchange: the same rule.
    const external = await signRs256(
      keys.privateKey,
      { sub: "lucia", tenant_id: "acme" },
      { now: epoch(clock()) },
    );
    const exchanged = await post("/auth/login", { access_token: external, centro_dett: "HQ" });
    expect(exchanged.statusCode).toBe(403);
    for (const own of [{ centro_dett: "MI01" }, {}]) {
      const res = await post("/auth/login", { username: "lucia", password: "lucia-secret-3", ...own });
      expect(res.statusCode, JSON.stringify(own)).toBe(200);
      expect(res.json().data.user.centro_dett).toBe("MI01");
      expect(decodeJwt(res.json().data.access_token).centro_dett).toBe("MI01");
    }
  });

  it("a request's center_dett is the caller's choice of form: any value is taken, the session's unit stays", async () => {
    const res = await post("/auth/login", { username: "lucia", password: "lucia-secret-3" });
    const token = res.json().data.access_token as string;
    const headers = { authorization: `Bearer ${token}` };
    for (const form of ["nuovo", "HQ", "anything"]) {
      const fields = await t.app.inject({
        method: "GET",
        url: `/api/v4/core/CUST/fields?source=anag-1&center_dett=${form}`,
        headers,
      });
      expect(fields.statusCode, form).toBe(200);
      const salesRep = fields.json().data.find((f: { cod_var: string }) => f.cod_var === "SALES_REP");
      // 'nuovo' has TB_COST rows of its own; any other value has none and takes the default rows.
      expect(salesRep.cod_on_off, form).toBe(form === "nuovo" ? "LDRNM" : "LDRM");
    }
    // Presentation only: peso still hides what it hides in every form, and the session keeps its unit.
    const nuovo = await t.app.inject({
      method: "GET",
      url: "/api/v4/core/CUST/fields?source=anag-1&center_dett=nuovo",
      headers,
    });
    expect(nuovo.json().data.map((f: { cod_var: string }) => f.cod_var)).not.toContain("CREDIT_LIMIT");
    const session = await sessionRow(decodeJwt(token).sessionId as string);
    expect(session!.CONTEXT).toMatchObject({ centro_dett: "MI01" });
  });

  it("the sample fixture's users log in with the grants the fixture gives them", async () => {
    for (const name of ["anna", "marco", "lucia", "greta"] as const) {
      const u = SAMPLE_USERS[name];
      const res = await post("/auth/login", { username: u.username, password: u.password });
      expect(res.statusCode, name).toBe(200);
      const user = res.json().data.user;
      expect(user).toMatchObject({ user_id: name, ...FIXTURE_PROFILE[name] });
      expect(user.grants).toEqual(FIXTURE_GRANTS[name]);
      const me = await t.app.inject({
        method: "GET",
        url: "/auth/me",
        headers: bearer(res.json().data.access_token),
      });
      expect(me.statusCode).toBe(200);
      expect(me.json().data).toMatchObject({
        user_id: name,
        tenant_id: FIXTURE_PROFILE[name].tenant_id,
        grants: FIXTURE_GRANTS[name],
      });
      // peso is a string, on /auth/me as in the login's user block (decisions.md: "peso is a string").
      expect(me.json().data.peso).toBe(FIXTURE_PROFILE[name].peso);
      expect(me.json().data.peso).toBe(user.peso);
      expect(typeof me.json().data.peso).toBe("string");
    }
  });

  it("interface data and DB settings follow the grants", async () => {
    const token = await loginAs(t.app, "lucia", "lucia-secret-3");
    const row = await sessionRow(decodeJwt(token).sessionId as string);
    const ui = row!.INTERFACE_DATA as {
      menus: Array<{ COD_MENU: string }>;
      boxes: Array<Record<string, unknown>>;
    };
    expect(ui.menus.map((m) => m.COD_MENU)).toEqual(["anag-1", "sales-1"]);
    expect(ui.boxes).toEqual([
      { COD_MENU: "anag-1", COD_DIM: "CUST", DESC_DIM: "Customers", OPERATIONS: ["read"], LEVEL: 1 },
      { COD_MENU: "sales-1", COD_DIM: "ORD", DESC_DIM: "Orders", OPERATIONS: ["read"], LEVEL: 1 },
    ]);
    expect(row!.DB_CONNECTIONS).toEqual({
      "anag-1": {
        dimension: "CUST",
        table_name: "TB_ANAG_CUST00",
        tenant_id: "acme",
        ambiente: "production",
        read: true,
        write: false,
      },
      "sales-1": {
        dimension: "ORD",
        table_name: "TB_DOC_ORD00",
        tenant_id: "acme",
        ambiente: "production",
        read: true,
        write: false,
      },
    });
  });

  it("variant A also answers at /api/v4/auth/login when the body has no uuid", async () => {
    const res = await post("/api/v4/auth/login", { username: "marco", password: "marco-secret-2" });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      status: "success",
      data: { token_type: "Bearer", user: { user_id: "marco" } },
    });
  });

  it("bad credentials: 401 in the standard body, the same for an unknown user and a wrong password", async () => {
    const wrong = await post("/auth/login", { username: "greta", password: "nope" });
    const unknown = await post("/auth/login", { username: "nobody", password: "nope" });
    expect(wrong.statusCode).toBe(401);
    expect(unknown.statusCode).toBe(401);
    expect(wrong.json()).toEqual({
      error: "AuthenticationError",
      message: "Invalid username or password.",
      code: "INVALID_CREDENTIALS",
      status: 401,
    });
    expect(unknown.json()).toEqual(wrong.json());
  });

  it("an unknown user costs the same password work as a wrong password", async () => {
    // The same work: the hash an unknown user is checked against has the stored hashes' cost.
    const { rows } = await t.services.db.query<{ PASSWORD_HASH: string }>(
      `SELECT "PASSWORD_HASH" FROM "TB_USER" WHERE "USER_ID" = 'lucia'`,
    );
    const costOf = (hash: string) => {
      const [scheme, n, r, p, , key] = hash.split("$");
      return { scheme, n, r, p, keyBytes: Buffer.from(key!, "base64").length };
    };
    expect(costOf(DUMMY_HASH)).toEqual(costOf(rows[0]!.PASSWORD_HASH));
    // And it is done: the process's CPU time (every thread's, scrypt runs in libuv's pool), which
    // a loaded machine does not stretch as it stretches the wall clock.
    const work = async (username: string) => {
      const start = process.cpuUsage();
      for (let i = 0; i < 3; i++) await post("/auth/login", { username, password: "wrong-password" });
      const used = process.cpuUsage(start);
      return used.user + used.system;
    };
    await work("nobody-warmup");
    const unknown = await work("nobody-else");
    const wrong = await work("lucia");
    expect(unknown).toBeGreaterThan(wrong * 0.5);
    // lucia's failures are counted; clear them for the tests below.
    await t.services.db.query(`DELETE FROM "TB_LOGIN_FAILURE" WHERE "USER_ID" = 'lucia'`);
  });

  it("five failures in a row lock the account at that address for 15 minutes with the same answer", async () => {
    for (let i = 0; i < 5; i++) {
      expect((await post("/auth/login", { username: "greta", password: `bad-${i}` })).statusCode).toBe(401);
    }
    // Per user and client address (test/auth/lockout.test.ts has the rest): inject's 127.0.0.1.
    const row = await t.services.db.query<{ CLIENT_KEY: string; LOCKED_UNTIL: Date | string | null }>(
      `SELECT "CLIENT_KEY", "LOCKED_UNTIL" FROM "TB_LOGIN_FAILURE" WHERE "USER_ID" = 'greta'`,
    );
    expect(row.rows).toHaveLength(1);
    expect(row.rows[0]!.CLIENT_KEY).toBe("127.0.0.1");
    expect(new Date(row.rows[0]!.LOCKED_UNTIL!).getTime()).toBe(clock().getTime() + 900_000);
    const locked = await post("/auth/login", { username: "greta", password: "greta-secret-4" });
    expect(locked.statusCode).toBe(401);
    expect(locked.json().code).toBe("INVALID_CREDENTIALS");
    clock.advance(901_000);
    const after = await post("/auth/login", { username: "greta", password: "greta-secret-4" });
    expect(after.statusCode).toBe(200);
    const cleared = await t.services.db.query(`SELECT 1 FROM "TB_LOGIN_FAILURE" WHERE "USER_ID" = 'greta'`);
    expect(cleared.rows).toEqual([]);
  });

  it("an inactive user cannot log in", async () => {
    await t.services.db.query(`UPDATE "TB_USER" SET "ACTIVE" = false WHERE "USER_ID" = 'lucia'`);
    try {
      const res = await post("/auth/login", { username: "lucia", password: "lucia-secret-3" });
      expect(res.statusCode).toBe(401);
      expect(res.json().code).toBe("INVALID_CREDENTIALS");
    } finally {
      await t.services.db.query(`UPDATE "TB_USER" SET "ACTIVE" = true WHERE "USER_ID" = 'lucia'`);
    }
  });

  it("bad login bodies are 400s in the standard body, never 500s", async () => {
    const cases: Array<[unknown, string]> = [
      [{ username: "anna" }, "MISSING_PARAMETER"],
      [{ password: "x" }, "MISSING_PARAMETER"],
      [{ username: 42, password: "x" }, "INVALID_PARAMETER"],
      [{ username: "anna", password: "x", source: ["a", "b"] }, "INVALID_PARAMETER"],
      [["anna"], "INVALID_REQUEST"],
      [{ access_token: 5 }, "INVALID_PARAMETER"],
    ];
    for (const [payload, code] of cases) {
      const res = await post("/auth/login", payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json(), JSON.stringify(payload)).toMatchObject({
        code,
        status: 400,
        error: "ValidationError",
      });
    }
    const noBody = await t.app.inject({ method: "POST", url: "/auth/login" });
    expect(noBody.statusCode).toBe(400);
    const badJson = await t.app.inject({
      method: "POST",
      url: "/auth/login",
      headers: { "content-type": "application/json" },
      payload: "{not json",
    });
    expect(badJson.statusCode).toBe(400);
    expect(badJson.json().code).toBe("INVALID_JSON");
  });

  it("text the database cannot store (NUL, an unpaired surrogate) is a 400, before or after the credentials", async () => {
    const cases: unknown[] = [
      { username: "a\u0000b", password: "x" },
      { username: "anna", password: "anna-secret-1", source: "\ud800" },
      { username: "anna", password: "anna-secret-1", centro_dett: "x\u0000" },
    ];
    for (const payload of cases) {
      const res = await post("/auth/login", payload);
      expect(res.statusCode, JSON.stringify(payload)).toBe(400);
      expect(res.json()).toMatchObject({ code: "INVALID_FIELD_VALUE", status: 400 });
    }
  });

  describe("variant B", () => {
    const bBody = { resource: "anag-1", tenantId: "acme", uuid: "device-42" };

    it("answers {idToken, issuedAt, durationTime, expiresIn} and the token works", async () => {
      const res = await post("/api/v4/auth/login", {
        ...bBody,
        username: "marco",
        password: "marco-secret-2",
      });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({
        issuedAt: epoch(clock()),
        durationTime: "900",
        expiresIn: epoch(clock()) + 900,
      });
      const claims = decodeJwt(body.idToken);
      expect(claims).toMatchObject({ user_id: "marco", tenant_id: "acme", source: "anag-1" });
      const row = await sessionRow(claims.sessionId as string);
      expect(row!.CONTEXT).toMatchObject({ uuid: "device-42", source: "anag-1" });
      const me = await t.app.inject({ method: "GET", url: "/auth/me", headers: bearer(body.idToken) });
      expect(me.statusCode).toBe(200);
    });

    it("bad credentials give 401 {status:0, message:'', data:[], errors:[]}", async () => {
      for (const payload of [
        { ...bBody, username: "marco", password: "wrong" },
        { ...bBody, username: "nobody", password: "wrong" },
        { ...bBody, tenantId: "globex", username: "marco", password: "marco-secret-2" },
      ]) {
        const res = await post("/api/v4/auth/login", payload);
        expect(res.statusCode).toBe(401);
        expect(res.json()).toEqual({ status: 0, message: "", data: [], errors: [] });
      }
      await t.services.db.query(`UPDATE "TB_USER" SET "FAILED_LOGINS" = 0 WHERE "USER_ID" = 'marco'`);
    });

    it("a body without resource, tenantId or credentials is a 400", async () => {
      const noResource = await post("/api/v4/auth/login", {
        uuid: "d",
        tenantId: "acme",
        username: "a",
        password: "b",
      });
      expect(noResource.statusCode).toBe(400);
      expect(noResource.json()).toMatchObject({ code: "MISSING_PARAMETER", status: 400 });
      const noCredentials = await post("/api/v4/auth/login", bBody);
      expect(noCredentials.statusCode).toBe(400);
      expect(noCredentials.json()).toMatchObject({ code: "MISSING_PARAMETER", field: "username" });
    });

    it("token exchange works in variant B", async () => {
      const external = await signRs256(
        keys.privateKey,
        { sub: "anna", tenant_id: "acme" },
        { now: epoch(clock()) },
      );
      const res = await post("/api/v4/auth/login", { ...bBody, access_token: external });
      expect(res.statusCode).toBe(200);
      expect(decodeJwt(res.json().idToken)).toMatchObject({ user_id: "anna", tenant_id: "acme" });
    });
  });

  describe("token exchange (variant A)", () => {
    it("an RS256 token of JWT_PUBLIC_KEYS naming an active user gives a session of that user", async () => {
      const external = await signRs256(
        keys.privateKey,
        { sub: "marco", tenant_id: "acme" },
        { now: epoch(clock()) },
      );
      const res = await post("/auth/login", {
        access_token: external,
        resource: "sales-1",
        tenantId: "acme",
      });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body.data.user).toMatchObject({
        user_id: "marco",
        tenant_id: "acme",
        source: "sales-1",
        peso: "2",
      });
      expect(body.data.user.grants).toEqual(FIXTURE_GRANTS.marco);
      expect(decodeProtectedHeader(body.data.access_token).alg).toBe("HS256");
    });

    it("user_id and the body's tenantId stand in for sub and tenant_id", async () => {
      const external = await signRs256(keys.privateKey, { user_id: "lucia" }, { now: epoch(clock()) });
      const res = await post("/auth/login", { access_token: external, tenantId: "acme" });
      expect(res.statusCode).toBe(200);
      expect(res.json().data.user.user_id).toBe("lucia");
    });

    it("refuses a token of another tenant, of an unknown user, expired, or not signed with the public keys", async () => {
      const now = epoch(clock());
      const otherTenant = await signRs256(keys.privateKey, { sub: "marco", tenant_id: "globex" }, { now });
      const tenantMismatch = await signRs256(keys.privateKey, { sub: "marco" }, { now });
      const unknownUser = await signRs256(keys.privateKey, { sub: "nobody", tenant_id: "acme" }, { now });
      const expired = await signRs256(
        keys.privateKey,
        { sub: "marco", tenant_id: "acme" },
        { now: now - 7200 },
      );
      const ownToken = await loginAs(t.app, "marco", "marco-secret-2");
      const cases: Array<[Record<string, unknown>, string]> = [
        [{ access_token: otherTenant }, "INVALID_CREDENTIALS"],
        [{ access_token: tenantMismatch, tenantId: "globex" }, "INVALID_CREDENTIALS"],
        [{ access_token: unknownUser }, "INVALID_CREDENTIALS"],
        [{ access_token: expired }, "TOKEN_EXPIRED"],
        [{ access_token: ownToken }, "TOKEN_INVALID"],
        [{ access_token: "not.a.jwt" }, "TOKEN_INVALID"],
      ];
      for (const [payload, code] of cases) {
        const res = await post("/auth/login", payload);
        expect(res.statusCode, code).toBe(401);
        expect(res.json(), code).toMatchObject({ code, status: 401, error: "AuthenticationError" });
      }
    });
  });
});
