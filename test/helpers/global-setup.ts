// Vitest's global setup: without TEST_DATABASE_URL, the run starts a real PostgreSQL of its own
// (test/helpers/embedded-postgres.ts) and names it in TEST_DATABASE_URL for the test workers,
// which vitest starts after this with the environment of this process; the teardown stops it.
// TEST_DATABASE_URL set (as .ci/run sets it): that server, nothing started.
// TEST_EMBEDDED_POSTGRES=off: nothing started either (PGlite only; the PostgreSQL-only files
// then hold no test, and vitest says so).
// TEST_PGBOUNCER=1 (as .ci/run sets it; issue 36 §3): a PgBouncer in transaction pooling mode is
// started in front of that PostgreSQL, named in TEST_PGBOUNCER_URL: the services of the
// PostgreSQL suites reach their database through it (test/helpers/env.ts createTestDatabase).
import { type EmbeddedPostgres, startEmbeddedPostgres } from "./embedded-postgres.ts";
import { startPgBouncer } from "./pgbouncer.ts";

type Teardown = () => Promise<void>;

export default async function setup(): Promise<Teardown | undefined> {
  const stopPostgres = await postgres();
  if (process.env.TEST_PGBOUNCER !== "1" || !process.env.TEST_DATABASE_URL) return stopPostgres;
  let bouncer: Awaited<ReturnType<typeof startPgBouncer>>;
  try {
    // PgBouncer's server connections per test database: fewer than a service's pool of 10 clients,
    // as a deployment behind it has.
    bouncer = await startPgBouncer(process.env.TEST_DATABASE_URL, { poolMode: "transaction", poolSize: 8 });
  } catch (err) {
    await stopPostgres?.();
    throw new Error(
      `TEST_PGBOUNCER=1: PgBouncer did not start: ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  process.env.TEST_PGBOUNCER_URL = bouncer.urlFor(process.env.TEST_DATABASE_URL);
  process.stderr.write(
    `[test] the suites' services reach PostgreSQL through PgBouncer on 127.0.0.1:${bouncer.port} (transaction pooling)\n`,
  );
  return async () => {
    delete process.env.TEST_PGBOUNCER_URL;
    await bouncer.stop();
    await stopPostgres?.();
  };
}

/** The run's own PostgreSQL unless one is named or none is wanted: its teardown. */
async function postgres(): Promise<Teardown | undefined> {
  if (process.env.TEST_DATABASE_URL || process.env.TEST_EMBEDDED_POSTGRES === "off") return undefined;
  const started = Date.now();
  let server: EmbeddedPostgres;
  try {
    server = await startEmbeddedPostgres();
  } catch (err) {
    throw new Error(
      "the tests' own PostgreSQL did not start (set TEST_DATABASE_URL to a server of yours, or " +
        `TEST_EMBEDDED_POSTGRES=off for PGlite only): ${err instanceof Error ? err.message : String(err)}`,
    );
  }
  // Vitest ends on SIGINT/SIGTERM through process.exit: the server must not outlive it.
  const onExit = () => server.killNow();
  process.once("exit", onExit);
  process.env.TEST_DATABASE_URL = server.url;
  process.stderr.write(
    `[test] PostgreSQL from embedded-postgres on 127.0.0.1:${server.port} (started in ${Date.now() - started} ms)\n`,
  );
  return async () => {
    delete process.env.TEST_DATABASE_URL;
    await server.stop();
    process.off("exit", onExit);
  };
}
