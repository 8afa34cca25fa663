// `npm start`: the whole service in one process (ROLE=all) on PORT, embedded database by default.
import { assertRoleAvailable, buildApp } from "./app.ts";
import { loadConfig, startupWarnings } from "./config.ts";
import { createLogger } from "./logger.ts";
import type { Config } from "./types.ts";
import { describeStartupError } from "./cli/startup-error.ts";
import { demoLoginsBanner, loadDemoDataIfEmpty } from "./demo/load-demo.ts";
import { startStatisticsJob } from "./db/statistics.ts";
import { eventPartsOf, inProcessBusWarning, startEventRuntime } from "./events/runtime.ts";
import { startHistoryRetention } from "./history/retention.ts";
import { openServices } from "./services.ts";

async function main(): Promise<void> {
  // This process opens the database of its config: a split role must be given the shared one.
  const config = loadConfig(process.env, { opensDatabase: true });
  if (config.role === "gateway") return runGateway(config);
  assertRoleAvailable(config);
  const services = await openServices(config);
  const { logger } = services;
  if (config.loadDemoData) {
    const logins = await loadDemoDataIfEmpty(services);
    if (logins) console.log(demoLoginsBanner(logins));
  }
  // PGlite has no autovacuum: the service keeps its planner statistics current itself.
  const statistics =
    services.db.kind === "pglite"
      ? startStatisticsJob({ db: services.db, logger, intervalMs: config.dbAnalyzeIntervalMs })
      : null;
  // Record history past HISTORY_RETENTION_DAYS, deleted in small batches by the writing roles.
  // Record history lives with the records: in the main database and in each profile's.
  const historyRetention =
    config.role === "all" || config.role === "write"
      ? [null, ...services.profiles.names].map((name) =>
          startHistoryRetention({
            db: services.atDatabase(name).db,
            logger: name === null ? logger : logger.child({ profile: name }),
            retentionDays: config.history.retentionDays,
            intervalMs: config.history.pruneIntervalMs,
          }),
        )
      : [];
  const app = await buildApp(services);
  const eventParts = eventPartsOf(config.role);
  const events = eventParts ? await startEventRuntime(services, eventParts) : null;
  await app.listen({ host: config.host, port: config.port });
  logger.info(
    {
      role: config.role,
      port: config.port,
      database: config.databaseUrl ? "postgresql" : `pglite:${config.dataDir}`,
      events: config.amqpUrl ? "rabbitmq" : "in-process",
    },
    "Dimensio is serving",
  );
  const busWarning = inProcessBusWarning(config);
  if (busWarning) logger.warn(busWarning);
  for (const warning of startupWarnings(config)) logger.warn(warning);

  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, "shutting down: no new requests, finishing the ones in flight");
    try {
      await app.close();
      await events?.stop();
      await statistics?.stop();
      for (const job of historyRetention) await job.stop();
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

/** ROLE=gateway: no database, no services; routes to the backends. */
async function runGateway(config: Config): Promise<void> {
  const logger = createLogger(config.logLevel);
  // Loaded by this role only: its HTTP proxy (undici) is no other role's business.
  const { buildGateway } = await import("./gateway/server.ts");
  const app = await buildGateway(config, logger);
  await app.listen({ host: config.host, port: config.port });
  logger.info({ role: "gateway", port: config.port }, "Dimensio gateway is serving");
  const stop = async () => {
    await app.close();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop());
  process.on("SIGINT", () => void stop());
}

main().catch((err) => {
  console.error(describeStartupError(err));
  process.exit(1);
});
