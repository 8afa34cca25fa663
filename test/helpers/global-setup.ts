// Vitest's global setup: without TEST_DATABASE_URL, the run starts a real PostgreSQL of its own
// (test/helpers/embedded-postgres.ts) and names it in TEST_DATABASE_URL for the test workers,
// which vitest starts after this with the environment of this process; the teardown stops it.
// TEST_DATABASE_URL set (as .ci/run sets it): that server, nothing started.
// TEST_EMBEDDED_POSTGRES=off: nothing started either (PGlite only; the PostgreSQL-only files
// then hold no test, and vitest says so).
import { type EmbeddedPostgres, startEmbeddedPostgres } from "./embedded-postgres.ts";

export default async function setup(): Promise<(() => Promise<void>) | undefined> {
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
