// `npm run import -- FILE.json [--reset]`: loads a fixture into the configured database.
import { loadConfig } from "../config.ts";
import { describeStartupError } from "./startup-error.ts";
import { ApiError } from "../errors.ts";
import { importFixture, readFixtureFile } from "../fixtures/import.ts";
import { createLogger } from "../logger.ts";
import { openServices } from "../services.ts";

async function run(argv: string[]): Promise<number> {
  const reset = argv.includes("--reset");
  const files = argv.filter((a) => !a.startsWith("--"));
  if (files.length !== 1) {
    console.error("usage: npm run import -- FILE.json [--reset]");
    return 2;
  }
  const config = loadConfig();
  const services = await openServices(config, { logger: createLogger("warn") });
  try {
    const fixture = await readFixtureFile(files[0]!);
    const summary = await importFixture(services, fixture, { reset });
    console.log(
      [
        `Imported ${files[0]}:`,
        `  metadata rows changed: ${summary.metadataChanged}`,
        `  tables created: ${summary.tablesCreated.join(", ") || "none"}; altered: ${summary.tablesAltered.join(", ") || "none"}`,
        `  tenants and users in the fixture (upserted): ${summary.tenants} and ${summary.users}`,
        `  records created: ${summary.recordsCreated} (insert-cascade children included)`,
        `  fixture records already loaded, skipped: ${summary.recordsSkipped}`,
      ].join("\n"),
    );
    return 0;
  } catch (err) {
    if (err instanceof ApiError) {
      console.error(err.message);
      for (const e of err.errors ?? []) console.error(`  - ${e.field}: ${e.message}`);
      return 1;
    }
    throw err;
  } finally {
    await services.close();
  }
}

run(process.argv.slice(2))
  .then((code) => process.exit(code))
  .catch((err) => {
    console.error(describeStartupError(err));
    process.exit(1);
  });
