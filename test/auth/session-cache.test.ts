// The session cache (issue 11): a token's session is read once, then served from the process's
// cache until the database announces a change (NOTIFY from triggers). Revocation stays immediate:
// in the process that revokes, and in another process of the same database (two processes).
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { decodeJwt } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createSessionCache } from "../../src/auth/session-cache.ts";
import { findSession } from "../../src/auth/sessions.ts";
import { openPostgres } from "../../src/db/database.ts";
import type { Services } from "../../src/services.ts";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import {
  BACKENDS,
  createTestApp,
  createTestServices,
  TEST_DATABASE_URL,
  TEST_JWT_SECRET,
  type TestApp,
} from "../helpers/env.ts";
import { eventually } from "../events/support.ts";
import { freePort, type Running, spawnScript, waitReady } from "../helpers/process.ts";
import { faultyProxy, throughProxy } from "../helpers/proxy.ts";

const SESSION_READ = /FROM "TB_ANAG_SESSIONS00" s LEFT JOIN "TB_USER"/;

describe.each(BACKENDS)("session cache (%s)", (backend) => {
  const statements: string[] = [];
  let cached: TestApp;
  let uncached: TestApp;
  beforeAll(async () => {
    const onStatement = (text: string) => statements.push(text);
    cached = await createTestApp(backend, { fixture: "sample", env: UNLIMITED_ENV, onStatement });
    uncached = await createTestApp(backend, {
      fixture: "sample",
      env: { ...UNLIMITED_ENV, SESSION_CACHE_MS: "0" },
      onStatement,
    });
  });
  afterAll(async () => {
    await cached?.close();
    await uncached?.close();
  });

  const me = (t: TestApp, token: string) =>
    t.app.inject({ method: "GET", url: "/auth/me", headers: bearer(token) });
  const sessionReads = () => statements.filter((s) => SESSION_READ.test(s)).length;

  it("reads a token's session once; the next requests read no session row", async () => {
    const token = await loginAs(cached.app, "marco", "marco-secret-2");
    statements.length = 0;
    for (let i = 0; i < 5; i++) expect((await me(cached, token)).statusCode).toBe(200);
    expect(sessionReads()).toBe(1);
  });

  it("SESSION_CACHE_MS=0 reads the session on every request", async () => {
    const token = await loginAs(uncached.app, "marco", "marco-secret-2");
    statements.length = 0;
    for (let i = 0; i < 3; i++) expect((await me(uncached, token)).statusCode).toBe(200);
    expect(sessionReads()).toBe(3);
  });

  it("logout ends the cached session at once", async () => {
    const token = await loginAs(cached.app, "marco", "marco-secret-2");
    expect((await me(cached, token)).statusCode).toBe(200);
    const out = await cached.app.inject({ method: "POST", url: "/auth/logout", headers: bearer(token) });
    expect(out.statusCode).toBe(200);
    const after = await me(cached, token);
    expect(after.statusCode).toBe(401);
    expect(after.json().code).toBe("TOKEN_INVALID");
  });

  it("a reused refresh token revokes the cached session at once", async () => {
    const login = await cached.app.inject({
      method: "POST",
      url: "/auth/login",
      payload: { username: "marco", password: "marco-secret-2" },
    });
    const { access_token: token, refresh_token: refresh } = login.json().data;
    expect((await me(cached, token)).statusCode).toBe(200);
    const renew = () =>
      cached.app.inject({ method: "POST", url: "/auth/refresh", payload: { refresh_token: refresh } });
    expect((await renew()).statusCode).toBe(200);
    expect((await renew()).statusCode).toBe(401);
    expect((await me(cached, token)).statusCode).toBe(401);
  });

  it("the triggers announce session, user and grant changes on dimensio_sessions", async () => {
    const heard: string[] = [];
    const unlisten = await cached.services.db.listen("dimensio_sessions", (p) => heard.push(p));
    try {
      const token = await loginAs(cached.app, "lucia", "lucia-secret-3");
      const sessionId = decodeJwt(token).sessionId as string;
      const db = cached.services.db;
      await db.query(`UPDATE "TB_USER" SET "PESO" = "PESO" WHERE "USER_ID" = 'lucia'`);
      await db.query(`UPDATE "TB_USER" SET "FAILED_LOGINS" = 0 WHERE "USER_ID" = 'lucia'`);
      await db.query(`UPDATE "TB_USER_GRANT" SET "LEVEL" = "LEVEL" WHERE "USER_ID" = 'lucia'`);
      await db.query(`UPDATE "TB_ANAG_SESSIONS00" SET "LAST_ACTIVITY" = now() WHERE "SESSION_ID" = $1`, [
        sessionId,
      ]);
      await db.query(`DELETE FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`, [sessionId]);
      await eventually(() => heard.includes(`d:${sessionId}`), { timeoutMs: 3000, what: "the notices" });
      // One u:lucia for the peso, one for the grant rows (PostgreSQL folds identical notices of one
      // transaction); FAILED_LOGINS is not announced. The activity mark is s:, the delete d:.
      expect(heard.filter((p) => p === "u:lucia").length).toBe(2);
      expect(heard.filter((p) => p.endsWith(sessionId))).toEqual([`s:${sessionId}`, `d:${sessionId}`]);
    } finally {
      await unlisten();
    }
  });
});

// The process that revokes answers only once another process of the database has forgotten the
// session: that process's connections go through a proxy that holds them.
const OTHER_PROCESS = TEST_DATABASE_URL ? ["postgres"] : [];

describe.each(OTHER_PROCESS)("revocation and another process's cache (%s)", () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await createTestApp("postgres", { fixture: "sample", env: UNLIMITED_ENV });
  });
  afterAll(async () => {
    await app?.close();
  });

  it("a logout answers only once another process's cache has forgotten the session", async () => {
    const db = app.services.db;
    if (db.kind !== "postgres") throw new Error("postgres only");
    // Another process: its own database handle, its connections through a proxy that can hold them.
    const url = new URL(db.connectionString);
    const proxy = await faultyProxy(url.hostname, Number(url.port || 5432));
    const otherDb = openPostgres(throughProxy(db.connectionString, proxy), { max: 2, watchdogMs: 0 });
    const other = await createSessionCache(otherDb, { ttlMs: 60_000 });
    try {
      const token = await loginAs(app.app, "lucia", "lucia-secret-3");
      const sessionId = decodeJwt(token).sessionId as string;
      const stored = await findSession(db, sessionId);
      expect(stored).not.toBeNull();
      let loads = 0;
      const load = async () => {
        loads++;
        return findSession(otherDb, sessionId);
      };
      expect(await other.get(sessionId, load)).not.toBeNull();
      expect(await other.get(sessionId, load)).not.toBeNull();
      expect(loads).toBe(1);
      // The other process hears nothing while held: the logout waits for it.
      proxy.stall();
      let answered = false;
      const logout = app.app
        .inject({ method: "POST", url: "/auth/logout", headers: bearer(token) })
        .then((res) => {
          answered = true;
          return res;
        });
      await eventually(async () => (await findSession(db, sessionId)) === null, { what: "the delete" });
      await new Promise((r) => setTimeout(r, 300));
      expect(answered).toBe(false);
      proxy.restore();
      expect((await logout).statusCode).toBe(200);
      // By the logout's answer the other process had forgotten it: its next look reads the row.
      expect(await other.get(sessionId, load)).toBeNull();
      expect(loads).toBe(2);
    } finally {
      proxy.restore();
      await other.stop();
      await otherDb.close();
      await proxy.close();
    }
  });
});

// Two processes of one PostgreSQL database: a session cached by B is refused by B as soon as A
// has answered the logout (the cache lives 60 s here, so only the notice can explain it).
const TWO_PROCESSES = TEST_DATABASE_URL ? ["postgres"] : [];

describe.each(TWO_PROCESSES)("session revocation across two processes (%s)", () => {
  let services: Services;
  let dataDir: string;
  const procs: Running[] = [];
  const bases: string[] = [];
  beforeAll(async () => {
    services = await createTestServices("postgres", { fixture: "sample" });
    const db = services.db.kind === "postgres" ? services.db.connectionString : "";
    dataDir = await mkdtemp(path.join(tmpdir(), "dimensio-two-"));
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      const running = spawnScript("src/main.ts", [], {
        ...UNLIMITED_ENV,
        DATABASE_URL: db,
        JWT_SECRET: TEST_JWT_SECRET,
        DEMO_DATA: "false",
        PORT: String(port),
        SESSION_CACHE_MS: "60000",
        DATA_DIR: path.join(dataDir, String(i)),
      });
      procs.push(running);
      bases.push(`http://127.0.0.1:${port}`);
    }
    await Promise.all(procs.map((p, i) => waitReady(bases[i]!, p)));
  }, 90_000);
  afterAll(async () => {
    for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGTERM");
    await Promise.all(procs.map((p) => p.exited));
    await services?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const call = (base: string, path: string, token: string, method = "GET") =>
    fetch(`${base}${path}`, { method, headers: { authorization: `Bearer ${token}` } });

  it("logout on A: B refuses the token on the very next request", async () => {
    const [a, b] = bases as [string, string];
    for (let round = 0; round < 5; round++) {
      const login = await fetch(`${a}/auth/login`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ username: "marco", password: "marco-secret-2" }),
      });
      expect(login.status).toBe(200);
      const token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
      expect((await call(b, "/auth/me", token)).status).toBe(200);
      expect((await call(b, "/auth/me", token)).status).toBe(200);
      expect((await call(a, "/auth/logout", token, "POST")).status).toBe(200);
      const after = await call(b, "/auth/me", token);
      expect(after.status).toBe(401);
      expect(((await after.json()) as { code: string }).code).toBe("TOKEN_INVALID");
    }
  });

  it("a user deactivated in the database: both processes refuse the user's tokens", async () => {
    const [a, b] = bases as [string, string];
    const login = await fetch(`${a}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "lucia", password: "lucia-secret-3" }),
    });
    const token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
    expect((await call(a, "/auth/me", token)).status).toBe(200);
    expect((await call(b, "/auth/me", token)).status).toBe(200);
    await services.db.query(`UPDATE "TB_USER" SET "ACTIVE" = false WHERE "USER_ID" = 'lucia'`);
    try {
      // The notice travels from the database to each process (milliseconds): awaited briefly.
      for (const base of [a, b]) {
        const deadline = Date.now() + 3000;
        let status = 0;
        while (Date.now() < deadline) {
          status = (await call(base, "/auth/me", token)).status;
          if (status === 401) break;
        }
        expect(status).toBe(401);
      }
    } finally {
      await services.db.query(`UPDATE "TB_USER" SET "ACTIVE" = true WHERE "USER_ID" = 'lucia'`);
    }
  });
});
