// `npm start`: the whole service in one process (ROLE=all) on PORT, embedded database by default.
import { assertRoleAvailable, buildApp } from "./app.ts";
import { loadConfig } from "./config.ts";
import { describeStartupError } from "./cli/startup-error.ts";
import { loadDemoDataIfEmpty } from "./demo/load-demo.ts";
import { openServices } from "./services.ts";

async function main(): Promise<void> {
  const config = loadConfig();
  assertRoleAvailable(config);
  const services = await openServices(config);
  const { logger } = services;
  if (config.loadDemoData) {
    const logins = await loadDemoDataIfEmpty(services);
    if (logins) {
      console.log("\nDemo data loaded. Log in with POST /auth/login {username, password}:");
      for (const l of logins)
        console.log(
          `  ${l.user_id.padEnd(8)} ${l.password.padEnd(16)} tenant ${l.tenant_id}, peso ${l.peso}`,
        );
      console.log("");
    }
  }
  const app = await buildApp(services);
  await app.listen({ host: config.host, port: config.port });
  logger.info(
    { port: config.port, database: config.databaseUrl ? "postgresql" : `pglite:${config.dataDir}` },
    "Dimensio is serving",
  );

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down: no new requests, finishing the ones in flight");
    try {
      await app.close();
      await services.close();
      process.exit(0);
    } catch (err) {
      logger.error({ err }, "shutdown failed");
      process.exit(1);
    }
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
}

main().catch((err) => {
  console.error(describeStartupError(err));
  process.exit(1);
});
