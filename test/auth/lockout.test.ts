// The login lockout per user and client address (issue 18 §4, docs/decisions.md "Login lockout per
// client address"): five wrong passwords from one address lock the user there for 15 minutes, and
// only there; the right password from another address still logs in. IPv6 clients are counted per
// /64. Behind the gateway the backend takes the client's address from X-Forwarded-For only on a
// request that carries the gateway's secret, and the gateway replaces what the client sent;
// without a gateway, X-Forwarded-For counts only from the peers TRUST_PROXY names.
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { clientKey } from "../../src/auth/lockout.ts";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { GATEWAY_SECRET_HEADER } from "../../src/gateway/secret.ts";
import { buildGateway } from "../../src/gateway/server.ts";
import { createLogger } from "../../src/logger.ts";
import { SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, manualClock, type TestApp } from "../helpers/env.ts";

const A = "203.0.113.5";
const B = "198.51.100.9";
const ANNA = SAMPLE_USERS.anna;

/** Login without the per-minute limits in the way (they are not what these tests are about). */
const LOGIN_UNLIMITED = {
  ...UNLIMITED_ENV,
  LOGIN_RATE_LIMIT_PER_IP_PER_MINUTE: "0",
  LOGIN_RATE_LIMIT_PER_USERNAME_PER_MINUTE: "0",
};

function loginFrom(app: FastifyInstance, address: string, password: string, headers = {}) {
  return app.inject({
    method: "POST",
    url: "/auth/login",
    payload: { username: ANNA.username, password },
    remoteAddress: address,
    headers,
  });
}

describe("the client key failures are counted against", () => {
  it("is the IPv4 address (also IPv4-mapped), or the IPv6 /64", () => {
    expect(clientKey("203.0.113.5")).toBe("203.0.113.5");
    expect(clientKey("::ffff:203.0.113.5")).toBe("203.0.113.5");
    expect(clientKey("2001:db8:1:2::10")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:0db8:0001:0002:aaaa:bbbb:cccc:dddd")).toBe("2001:db8:1:2::/64");
    expect(clientKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(clientKey("fe80::1%eth0")).toBe("fe80:0:0:0::/64");
    expect(clientKey("::1")).toBe("0:0:0:0::/64");
  });
});

describe.each(BACKENDS)("login lockout per user and client address (%s)", (backend) => {
  let t: TestApp;
  const clock = manualClock();
  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", clock, env: LOGIN_UNLIMITED });
  });
  afterAll(async () => t?.close());

  const rows = async () =>
    (
      await t.services.db.query<{ CLIENT_KEY: string; FAILURES: number; LOCKED_UNTIL: Date | string | null }>(
        `SELECT "CLIENT_KEY", "FAILURES", "LOCKED_UNTIL" FROM "TB_LOGIN_FAILURE" WHERE "USER_ID" = 'anna' ORDER BY 1`,
      )
    ).rows.map((r) => ({ ...r, LOCKED_UNTIL: r.LOCKED_UNTIL && new Date(r.LOCKED_UNTIL).getTime() }));

  it("five wrong passwords from A lock the metadata administrator at A only; B still logs in; it unlocks after 15 minutes", async () => {
    for (let i = 0; i < 4; i++) expect((await loginFrom(t.app, A, `bad-${i}`)).statusCode).toBe(401);
    expect(await rows()).toEqual([{ CLIENT_KEY: A, FAILURES: 4, LOCKED_UNTIL: null }]);
    expect((await loginFrom(t.app, A, "bad-4")).statusCode).toBe(401);
    expect(await rows()).toEqual([{ CLIENT_KEY: A, FAILURES: 0, LOCKED_UNTIL: clock().getTime() + 900_000 }]);

    // At A the right password gets the same answer as a wrong one.
    const locked = await loginFrom(t.app, A, ANNA.password);
    expect(locked.statusCode).toBe(401);
    expect(locked.json().code).toBe("INVALID_CREDENTIALS");
    // From B the user logs in, and B's success leaves A's lock alone.
    const elsewhere = await loginFrom(t.app, B, ANNA.password);
    expect(elsewhere.statusCode).toBe(200);
    expect(elsewhere.json().data.user.user_id).toBe("anna");
    expect((await loginFrom(t.app, A, ANNA.password)).statusCode).toBe(401);
    // The account itself was never locked.
    const user = await t.services.db.query<{ FAILED_LOGINS: number; LOCKED_UNTIL: unknown }>(
      `SELECT "FAILED_LOGINS", "LOCKED_UNTIL" FROM "TB_USER" WHERE "USER_ID" = 'anna'`,
    );
    expect(user.rows[0]).toEqual({ FAILED_LOGINS: 0, LOCKED_UNTIL: null });

    clock.advance(899_000);
    expect((await loginFrom(t.app, A, ANNA.password)).statusCode).toBe(401);
    clock.advance(2_000);
    expect((await loginFrom(t.app, A, ANNA.password)).statusCode).toBe(200);
    expect(await rows()).toEqual([]);
  });

  it("an IPv6 client is locked by its /64: another address of that /64 is locked, another /64 is not", async () => {
    for (let i = 0; i < 5; i++) await loginFrom(t.app, "2001:db8:1:2::10", `bad-${i}`);
    expect((await loginFrom(t.app, "2001:db8:1:2::99", ANNA.password)).statusCode).toBe(401);
    expect((await loginFrom(t.app, "2001:db8:1:3::1", ANNA.password)).statusCode).toBe(200);
    clock.advance(901_000);
    expect((await loginFrom(t.app, "2001:db8:1:2::10", ANNA.password)).statusCode).toBe(200);
  });

  it("failures older than the lock window are forgotten; a success clears its own address only", async () => {
    for (let i = 0; i < 4; i++) await loginFrom(t.app, A, `bad-${i}`);
    await loginFrom(t.app, B, "bad-b");
    clock.advance(901_000);
    // The fifth failure from A comes after the window: it starts a new count instead of locking.
    expect((await loginFrom(t.app, A, "bad-late")).statusCode).toBe(401);
    // ... and B's run-out counter is dropped on the way.
    expect(await rows()).toEqual([{ CLIENT_KEY: A, FAILURES: 1, LOCKED_UNTIL: null }]);
    await loginFrom(t.app, B, "bad-b2");
    expect((await loginFrom(t.app, A, ANNA.password)).statusCode).toBe(200);
    expect((await rows()).map((r) => r.CLIENT_KEY)).toEqual([B]);
    clock.advance(901_000);
  });

  it("TB_USER.LOCKED_UNTIL (set by an operator) locks the account from every address", async () => {
    await t.services.db.query(`UPDATE "TB_USER" SET "LOCKED_UNTIL" = $1 WHERE "USER_ID" = 'anna'`, [
      new Date(clock().getTime() + 60_000),
    ]);
    try {
      expect((await loginFrom(t.app, A, ANNA.password)).statusCode).toBe(401);
      expect((await loginFrom(t.app, B, ANNA.password)).statusCode).toBe(401);
      clock.advance(61_000);
      expect((await loginFrom(t.app, B, ANNA.password)).statusCode).toBe(200);
    } finally {
      await t.services.db.query(`UPDATE "TB_USER" SET "LOCKED_UNTIL" = NULL WHERE "USER_ID" = 'anna'`);
    }
  });
});

describe("the client's address behind the gateway (ROLE=auth backend, ROLE=gateway in front)", () => {
  const SECRET = "lockout-gateway-secret";
  let auth: TestApp;
  let gateway: FastifyInstance;
  const clock = manualClock();

  beforeAll(async () => {
    auth = await createTestApp("pglite", {
      fixture: "sample",
      clock,
      env: { ...LOGIN_UNLIMITED, ROLE: "auth", GATEWAY_SECRET: SECRET },
    });
    await auth.app.listen({ port: 0, host: "127.0.0.1" });
    const url = `http://127.0.0.1:${(auth.app.server.address() as AddressInfo).port}`;
    const config = loadConfig({
      LOG_LEVEL: "silent",
      ROLE: "gateway",
      GATEWAY_SECRET: SECRET,
      READ_BACKEND_URL: url,
      WRITE_BACKEND_URL: url,
      AUTH_BACKEND_URL: url,
    });
    gateway = await buildGateway(config, createLogger("silent"));
    await gateway.ready();
  });
  afterAll(async () => {
    await gateway?.close();
    await auth?.close();
  });

  it("failures through the gateway lock the client's address, not the gateway's; a spoofed X-Forwarded-For changes nothing", async () => {
    for (let i = 0; i < 5; i++) {
      // The client claims to be B: the gateway replaces the header with the address it sees.
      expect((await loginFrom(gateway, A, `bad-${i}`, { "x-forwarded-for": B })).statusCode).toBe(401);
    }
    const keys = await auth.services.db.query<{ CLIENT_KEY: string }>(
      `SELECT "CLIENT_KEY" FROM "TB_LOGIN_FAILURE" WHERE "USER_ID" = 'anna'`,
    );
    expect(keys.rows).toEqual([{ CLIENT_KEY: A }]);
    expect((await loginFrom(gateway, A, ANNA.password, { "x-forwarded-for": B })).statusCode).toBe(401);
    expect((await loginFrom(gateway, B, ANNA.password)).statusCode).toBe(200);
  });

  it("the backend takes X-Forwarded-For only with the gateway's secret", async () => {
    // With the secret (the gateway's request): the forwarded address counts; A is locked.
    const viaGateway = await loginFrom(auth.app, "127.0.0.1", ANNA.password, {
      [GATEWAY_SECRET_HEADER]: SECRET,
      "x-forwarded-for": A,
    });
    expect(viaGateway.statusCode).toBe(401);
    const fromB = await loginFrom(auth.app, "127.0.0.1", ANNA.password, {
      [GATEWAY_SECRET_HEADER]: SECRET,
      "x-forwarded-for": B,
    });
    expect(fromB.statusCode).toBe(200);
    // Without it (or with a wrong one) nothing is answered at all, let alone trusted.
    for (const secret of [undefined, "wrong"]) {
      const res = await loginFrom(auth.app, "127.0.0.1", ANNA.password, {
        ...(secret ? { [GATEWAY_SECRET_HEADER]: secret } : {}),
        "x-forwarded-for": B,
      });
      expect(res.statusCode).toBe(403);
      expect(res.json().code).toBe("GATEWAY_REQUIRED");
    }
  });
});

describe("X-Forwarded-For without a gateway (ROLE=all)", () => {
  it("is ignored unless TRUST_PROXY names the peer", async () => {
    const plain = await createTestApp("pglite", { fixture: "sample", env: LOGIN_UNLIMITED });
    try {
      // Each attempt claims another address: all are counted against the socket's address.
      for (let i = 0; i < 5; i++) {
        await loginFrom(plain.app, A, `bad-${i}`, { "x-forwarded-for": `192.0.2.${i + 1}` });
      }
      expect((await loginFrom(plain.app, A, ANNA.password, { "x-forwarded-for": B })).statusCode).toBe(401);
    } finally {
      await plain.close();
    }

    const proxied = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...LOGIN_UNLIMITED, TRUST_PROXY: "10.0.0.0/8" },
    });
    try {
      // The load balancer at 10.0.0.2 names the client: the lock is the client's.
      for (let i = 0; i < 5; i++)
        await loginFrom(proxied.app, "10.0.0.2", `bad-${i}`, { "x-forwarded-for": A });
      expect(
        (await loginFrom(proxied.app, "10.0.0.2", ANNA.password, { "x-forwarded-for": A })).statusCode,
      ).toBe(401);
      expect(
        (await loginFrom(proxied.app, "10.0.0.2", ANNA.password, { "x-forwarded-for": B })).statusCode,
      ).toBe(200);
      // A peer outside TRUST_PROXY is its own client, whatever it claims.
      expect((await loginFrom(proxied.app, A, ANNA.password, { "x-forwarded-for": B })).statusCode).toBe(401);
    } finally {
      await proxied.close();
    }
  });

  it("TRUST_PROXY takes a number of proxies or their addresses, and refuses trusting everyone", () => {
    const base = { JWT_SECRET: "x".repeat(40) };
    expect(loadConfig(base).trustProxy).toBe(false);
    expect(loadConfig({ ...base, TRUST_PROXY: "2" }).trustProxy).toBe(2);
    expect(loadConfig({ ...base, TRUST_PROXY: "10.0.0.0/8, ::1, loopback" }).trustProxy).toEqual([
      "10.0.0.0/8",
      "::1",
      "loopback",
    ]);
    for (const bad of ["true", "10.0.0.0/33", "proxy.example.com"]) {
      expect(() => loadConfig({ ...base, TRUST_PROXY: bad }), bad).toThrow(ConfigError);
      expect(() => loadConfig({ ...base, TRUST_PROXY: bad }), bad).toThrow(/TRUST_PROXY/);
    }
  });
});
