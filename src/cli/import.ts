// `npm run import -- FILE.json [--reset]`: loads a fixture into the configured database.
import { importFixture, readFixtureFile } from "../fixtures/import.ts";
import { runCommand, withServices } from "./command.ts";

async function run(argv: string[]): Promise<number> {
  const reset = argv.includes("--reset");
  const files = argv.filter((a) => !a.startsWith("--"));
  if (files.length !== 1) {
    console.error("usage: npm run import -- FILE.json [--reset]");
    return 2;
  }
  return withServices(async (services) => {
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
  });
}

runCommand(() => run(process.argv.slice(2)));
