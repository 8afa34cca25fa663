// `npm run import -- FILE.json [--reset]`: loads a fixture into the configured database. An
// unknown option (`--rest`) or a wrong number of files is refused before the database is opened.
import { importFixture, readFixtureFile } from "../fixtures/import.ts";
import { readCommandLine, runCommand, withServices } from "./command.ts";

const SPEC = {
  usage: "usage: npm run import -- FILE.json [--reset]",
  help: [
    "Loads a fixture (fixtures/fixture-format.md) into the configured database (DATABASE_URL, else the",
    "embedded database in DATA_DIR: stop `npm start` first, it belongs to one process). The whole file",
    "is validated first and refused whole, every problem listed; then metadata is upserted, tables",
    "created or altered, tenants, users and grants created, and records created through the write",
    "pipeline. Importing the same file twice changes nothing.",
    "Arguments: FILE.json, the fixture.",
    "Options: --reset, reload it: first empty the fixture's dimension tables (every tenant's rows),",
    "their import ledger, history and sequences, and remove the fixture's users; --help (-h), this text.",
    "Exit: 0 imported; 1 refused (nothing written) or failed; 2 misused (an unknown option or not",
    "one file: refused before the database is opened).",
  ],
  flags: ["--reset"],
  args: 1,
} as const;

async function run(argv: string[]): Promise<number> {
  const line = readCommandLine(SPEC, argv);
  if (typeof line === "number") return line;
  const reset = line.flags.has("--reset");
  const files = line.args;
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
