// Passwords and tokens never reach the logs, responses or the session row; the JWT secret is
// generated once and kept in DATA_DIR when JWT_SECRET is unset.
import { mkdtemp, readFile, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";
import { jwtVerify } from "jose";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.ts";
import { loadSigningSecret, SECRET_FILE_NAME } from "../../src/auth/keys.ts";
import { loadConfig } from "../../src/config.ts";
import { importFixture, readFixtureFile } from "../../src/fixtures/import.ts";
import { openServices, type Services } from "../../src/services.ts";
import { bearer, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestDatabase, SAMPLE_FIXTURE } from "../helpers/env.ts";

describe.each(BACKENDS)("secrets stay secret (%s)", (backend) => {
  let services: Services;
  let app: FastifyInstance;
  let dataDir: string;
  const lines: string[] = [];

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "dimensio-auth-"));
    const sink = new Writable({
      write(chunk, _enc, done) {
        lines.push(String(chunk));
        done();
      },
    });
    // No JWT_SECRET: the service must generate one in DATA_DIR.
    const config = loadConfig({
      LOG_LEVEL: "trace",
      DEMO_DATA: "false",
      DATA_DIR: dataDir,
      ...UNLIMITED_ENV,
    });
    services = await openServices(config, {
      db: await createTestDatabase(backend),
      logger: pino({ level: "trace" }, sink),
    });
    await importFixture(services, await readFixtureFile(SAMPLE_FIXTURE));
    app = await buildApp(services);
    await app.ready();
  });
  afterAll(async () => {
    await app?.close();
    await services?.close();
  });

  it("no password, hash or token appears in logs, responses or the session row", async () => {
    const ok = await app.inject({
      method: "POST",
      url: "/auth/login",
      payload: { username: "anna", password: "anna-secret-1" },
    });
    expect(ok.statusCode).toBe(200);
    const { access_token, refresh_token } = ok.json().data;
    const bad = await app.inject({
      method: "POST",
      url: "/auth/login",
      payload: { username: "anna", password: "guess-me-42" },
    });
    expect(bad.statusCode).toBe(401);
    expect(bad.body).not.toContain("guess-me-42");
    const refreshed = await app.inject({ method: "POST", url: "/auth/refresh", payload: { refresh_token } });
    expect(refreshed.statusCode).toBe(200);
    await app.inject({ method: "GET", url: "/auth/me", headers: bearer(access_token) });

    const hash = (
      await services.db.query<{ PASSWORD_HASH: string }>(
        `SELECT "PASSWORD_HASH" FROM "TB_USER" WHERE "USER_ID" = 'anna'`,
      )
    ).rows[0]!.PASSWORD_HASH;
    const log = lines.join("");
    expect(log).toContain("incoming request");
    for (const secret of ["anna-secret-1", "guess-me-42", hash, access_token, refresh_token]) {
      expect(log).not.toContain(secret);
      expect(ok.body).not.toContain(hash);
    }
    const sessions = await services.db.query(`SELECT * FROM "TB_ANAG_SESSIONS00" WHERE "USER_ID" = 'anna'`);
    expect(JSON.stringify(sessions.rows)).not.toMatch(/scrypt|anna-secret-1/);
  });

  it("without JWT_SECRET a secret is generated once in DATA_DIR and signs the tokens", async () => {
    const file = path.join(dataDir, SECRET_FILE_NAME);
    const stored = (await readFile(file, "utf8")).trim();
    expect(stored.length).toBeGreaterThanOrEqual(32);
    expect((await stat(file)).mode & 0o777).toBe(0o600);
    const again = await loadSigningSecret(services.config);
    expect(new TextDecoder().decode(again)).toBe(stored);

    const res = await app.inject({
      method: "POST",
      url: "/auth/login",
      payload: { username: "greta", password: "greta-secret-4" },
    });
    const token = res.json().data.access_token as string;
    const verified = await jwtVerify(token, new TextEncoder().encode(stored), {
      currentDate: services.clock(),
    });
    expect(verified.payload.user_id).toBe("greta");
  });
});
