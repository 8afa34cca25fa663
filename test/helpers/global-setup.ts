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
  const server: EmbeddedPostgres = await startEmbeddedPostgres();
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
