// Test environments: a fresh database per call, on PGlite (always) and on the real PostgreSQL
// of TEST_DATABASE_URL (when set; .ci/run sets it). No mocks: the same services as production.
import { randomBytes } from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyInstance } from "fastify";
import pg from "pg";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import {
  type DatabaseHandle,
  openPglite,
  openPostgres,
  type StatementObserver,
} from "../../src/db/database.ts";
import { importFixture, readFixtureFile } from "../../src/fixtures/import.ts";
import { createLogger } from "../../src/logger.ts";
import { openServices, type Services } from "../../src/services.ts";

export type Backend = "pglite" | "postgres";

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || null;
export const TEST_AMQP_URL = process.env.TEST_AMQP_URL || null;
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || null;

/** PGlite always; PostgreSQL too when TEST_DATABASE_URL names one. */
export const BACKENDS: Backend[] = TEST_DATABASE_URL ? ["pglite", "postgres"] : ["pglite"];

const here = path.dirname(fileURLToPath(import.meta.url));
export const SAMPLE_FIXTURE = path.resolve(here, "../../fixtures/sample.json");
export const DEMO_FIXTURE = path.resolve(here, "../../src/demo/demo-fixture.json");

export const TEST_JWT_SECRET = "test-secret-test-secret-test-secret-0123456789";

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

export interface TestDatabaseOptions {
  onStatement?: StatementObserver;
  /**
   * PostgreSQL: the service connects through 127.0.0.1:<through> (a TCP proxy the test started
   * to TEST_DATABASE_URL's server, to cut); the test's own create and drop go direct.
   */
  through?: number;
  /**
   * PostgreSQL: never through the run's PgBouncer (TEST_PGBOUNCER_URL): for what a session of
   * its own is needed for (named prepared statements and their plans).
   */
  direct?: boolean;
}

/** A new, empty database. Closing it drops it (PostgreSQL) or discards it (PGlite, in memory). */
export async function createTestDatabase(
  backend: Backend,
  opts: TestDatabaseOptions = {},
): Promise<DatabaseHandle> {
  if (backend === "pglite")
    return openPglite(null, opts.onStatement ? { onStatement: opts.onStatement } : {});
  if (!TEST_DATABASE_URL) throw new Error("TEST_DATABASE_URL is not set");
  const name = `dimensio_t_${process.pid}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();
  const direct = withDatabase(TEST_DATABASE_URL, name);
  const url = new URL(direct);
  // Through PgBouncer when the run started one (TEST_PGBOUNCER=1: global-setup.ts), as a
  // deployment of many processes runs (decisions.md §18, DATABASE_POOL_MODE=transaction), its
  // LISTEN direct; a test that cuts its own proxy goes through that instead.
  const bouncer = opts.through === undefined && !opts.direct ? process.env.TEST_PGBOUNCER_URL : undefined;
  if (opts.through !== undefined) {
    url.hostname = "127.0.0.1";
    url.port = String(opts.through);
  } else if (bouncer) {
    const b = new URL(bouncer);
    url.hostname = b.hostname;
    url.port = b.port;
  }
  const db = openPostgres(url.toString(), {
    max: 10,
    ...(bouncer ? { poolMode: "transaction" as const, listenUrl: direct } : {}),
    ...(opts.onStatement ? { onStatement: opts.onStatement } : {}),
  });
  const close = db.close;
  return Object.assign(db, {
    // Behind the run's PgBouncer, what a test hands another process or handle of its own (a CLI,
    // a second service, a listener) is the database itself: such a process's default session mode.
    ...(bouncer ? { connectionString: direct } : {}),
    async close() {
      await close();
      const a = new pg.Client({ connectionString: TEST_DATABASE_URL! });
      await a.connect();
      await a.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await a.end();
    },
  });
}

export interface TestEnvOptions {
  /** "sample" (fixtures/sample.json), "demo", a fixture object, or none. */
  fixture?: "sample" | "demo" | Record<string, unknown>;
  env?: Record<string, string>;
  clock?: () => Date;
  /** The service's logger (silent when absent): tests that read the log pass their own. */
  logger?: Services["logger"];
  /** Told every statement the service sends (see OpenOptions.onStatement). */
  onStatement?: StatementObserver;
  /** PostgreSQL: the service's connections go through this local port (see TestDatabaseOptions). */
  databaseThrough?: number;
  /** PostgreSQL: never through the run's PgBouncer (see TestDatabaseOptions.direct). */
  databaseDirect?: boolean;
  /**
   * PostgreSQL: DATABASE_READ_URL names the test database through 127.0.0.1:<replicaThrough> (a
   * TCP proxy the test started to TEST_DATABASE_URL's server): the replica is the same database.
   */
  replicaThrough?: number;
}

export async function createTestServices(backend: Backend, opts: TestEnvOptions = {}): Promise<Services> {
  const db = await createTestDatabase(backend, {
    ...(opts.onStatement ? { onStatement: opts.onStatement } : {}),
    ...(opts.databaseThrough !== undefined ? { through: opts.databaseThrough } : {}),
    ...(opts.databaseDirect ? { direct: true } : {}),
  });
  let replicaUrl: string | null = null;
  if (opts.replicaThrough !== undefined) {
    if (db.kind !== "postgres") throw new Error("a replica needs PostgreSQL");
    const url = new URL(db.connectionString);
    url.hostname = "127.0.0.1";
    url.port = String(opts.replicaThrough);
    replicaUrl = url.toString();
  }
  const config = loadConfig({
    LOG_LEVEL: "silent",
    JWT_SECRET: TEST_JWT_SECRET,
    DEMO_DATA: "false",
    ...(replicaUrl ? { DATABASE_READ_URL: replicaUrl } : {}),
    ...opts.env,
  });
  const services = await openServices(config, {
    db,
    logger: opts.logger ?? createLogger("silent"),
    ...(opts.clock ? { clock: opts.clock } : {}),
  });
  if (opts.fixture) {
    const fixture =
      opts.fixture === "sample"
        ? await readFixtureFile(SAMPLE_FIXTURE)
        : opts.fixture === "demo"
          ? await readFixtureFile(DEMO_FIXTURE)
          : opts.fixture;
    await importFixture(services, fixture);
  }
  return services;
}

export interface TestApp {
  app: FastifyInstance;
  services: Services;
  close(): Promise<void>;
}

export async function createTestApp(backend: Backend, opts: TestEnvOptions = {}): Promise<TestApp> {
  const services = await createTestServices(backend, opts);
  const app = await buildApp(services);
  await app.ready();
  return {
    app,
    services,
    async close() {
      await app.close();
      await services.close();
    },
  };
}

/** A clock tests move by hand (idle expiry, token renewal) instead of sleeping. */
export function manualClock(start = new Date("2026-11-21T10:00:00Z")) {
  let now = start.getTime();
  const clock = () => new Date(now);
  return Object.assign(clock, {
    advance(ms: number) {
      now += ms;
    },
    set(d: Date) {
      now = d.getTime();
    },
  });
}
