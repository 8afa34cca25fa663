// `npm run migrate`: applies the SQL migrations to the configured database and exits.
import { ConfigError, loadConfig } from "../config.ts";
import { DatabaseInUseError } from "../db/database.ts";
import { migrate } from "../db/migrate.ts";
import { openDatabase } from "../services.ts";

async function run(): Promise<void> {
  const db = await openDatabase(loadConfig());
  try {
    const { applied } = await migrate(db);
    console.log(
      applied.length ? `Applied: ${applied.join(", ")}` : "Nothing to apply: the database is up to date.",
    );
  } finally {
    await db.close();
  }
}

run().catch((err) => {
  console.error(err instanceof ConfigError || err instanceof DatabaseInUseError ? err.message : err);
  process.exit(1);
});
