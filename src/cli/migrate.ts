// `npm run migrate`: applies the SQL migrations to the configured database and exits.
import { loadConfig } from "../config.ts";
import { describeStartupError } from "./startup-error.ts";
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
  console.error(describeStartupError(err));
  process.exit(1);
});
