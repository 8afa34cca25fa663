// `npm run migrate`: applies the SQL migrations to the configured database and exits. It takes no
// argument: anything else on its command line is refused before the database is opened.
import { loadConfig } from "../config.ts";
import { migrate } from "../db/migrate.ts";
import { openDatabase } from "../services.ts";
import { readCommandLine, runCommand } from "./command.ts";

const SPEC = {
  usage: "usage: npm run migrate [-- --help]",
  help: [
    "Applies the SQL migrations under prisma/migrations/ that the configured database (DATABASE_URL,",
    "else the embedded database in DATA_DIR) has not had yet, in name order, under an advisory lock",
    "(safe beside a running service or another migrate), then exits. The service applies them itself",
    "at start too. A migration changed after it was applied is refused.",
    "Arguments: none. Options: --help (-h), this text.",
    "Exit: 0 applied or up to date; 1 failed (all in one transaction: nothing applied); 2 misused",
    "(an argument or an unknown option: refused before the database is opened).",
  ],
  args: 0,
} as const;

async function run(argv: string[]): Promise<number> {
  const line = readCommandLine(SPEC, argv);
  if (typeof line === "number") return line;
  const db = await openDatabase(loadConfig());
  try {
    const { applied } = await migrate(db);
    console.log(
      applied.length ? `Applied: ${applied.join(", ")}` : "Nothing to apply: the database is up to date.",
    );
    return 0;
  } finally {
    await db.close();
  }
}

runCommand(() => run(process.argv.slice(2)));
