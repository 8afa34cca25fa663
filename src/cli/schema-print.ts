// `npm run schema:print [-- FIXTURE.json | --user=USER_ID]`: prints the GraphQL SDL of a fixture's
// metadata, the full, administrator's schema (every dimension, mutation and field; a user's own
// schema is a part of it, decisions "A GraphQL schema per access profile"). Without a file, the
// bundled demo data set's (src/demo/demo-fixture.json: what `npm start` serves on an empty
// database); no database is read or opened. With --user, the schema that user is served instead:
// the database's metadata and the user's grants and peso (./user-schema.ts), read from the
// database the service's settings name (DATABASE_URL or DATA_DIR), as the other commands do.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { projectRoot } from "../paths.ts";
import { printFixtureSchema } from "../schema/print.ts";
import { readCommandLine, runCommand, withServices } from "./command.ts";
import { userSchema } from "./user-schema.ts";

/** The demo data set `npm start` loads into an empty database (src/demo/load-demo.ts). */
const DEMO_FIXTURE = path.join(projectRoot(), "src/demo/demo-fixture.json");

const SPEC = {
  usage: "usage: npm run schema:print [-- FIXTURE.json | --user=USER_ID]",
  help: [
    "Prints the GraphQL schema (SDL, types and fields sorted) that the service builds from a",
    "fixture's metadata: the full, administrator's schema, every dimension, mutation and field (a",
    "user's schema is the part of it their access profile may use). Reads no database but with --user.",
    "Arguments: FIXTURE.json, a fixture (fixtures/fixture-format.md), optional: without it, the demo",
    "data set's schema (src/demo/demo-fixture.json, what `npm start` serves on an empty database).",
    "Options: --user=USER_ID, instead of a fixture: the schema that user (TB_USER.USER_ID) is served,",
    "from the database's metadata and the user's grants and peso (the database DATABASE_URL or",
    "DATA_DIR names, as for `npm start`); generate a front end's types from it when its documents",
    "must run for users of that access profile. --help (-h), this text.",
    "Exit: 0 printed; 1 the file unreadable or its metadata invalid, or no such user; 2 misused (an",
    "unknown option, more than one file, a file with --user, --user given twice or empty).",
  ],
  valued: ["--user=USER_ID"],
  args: [0, 1],
} as const;

/** Written whole before the process exits (a pipe may take it in parts). */
function printed(sdl: string): Promise<void> {
  return new Promise<void>((resolve, reject) =>
    process.stdout.write(`${sdl}\n`, (err) => (err ? reject(err) : resolve())),
  );
}

/** The schema `userId` is served, printed; a note on standard error says what chose it. */
function printUserSchema(userId: string): Promise<number> {
  return withServices(async (services) => {
    const schema = await userSchema(services, userId);
    console.error(
      `The schema of user ${userId} (tenant ${schema.tenantId}, peso ${schema.peso})${schema.active ? "" : "; the user is inactive and cannot log in"}.`,
    );
    await printed(schema.sdl);
    return 0;
  });
}

async function run(argv: string[]): Promise<number> {
  const line = readCommandLine(SPEC, argv);
  if (typeof line === "number") return line;
  const users = line.values.get("--user");
  if (users) {
    const misuse = (reason: string) => {
      console.error(reason);
      console.error(SPEC.usage);
      return 2;
    };
    if (line.args.length)
      return misuse("--user prints a user's schema from the database: give no FIXTURE.json with it.");
    if (users.length > 1) return misuse("Give one user (--user=USER_ID once).");
    if (!users[0]) return misuse("--user takes a user's id (TB_USER.USER_ID): --user=USER_ID.");
    return printUserSchema(users[0]);
  }
  const file = line.args[0] ?? DEMO_FIXTURE;
  let fixture: unknown;
  try {
    fixture = JSON.parse(await readFile(file, "utf8"));
  } catch (err) {
    console.error(`${file}: ${err instanceof Error ? err.message : String(err)}`);
    return 1;
  }
  let sdl: string;
  try {
    sdl = printFixtureSchema(fixture);
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    return 1;
  }
  await printed(sdl);
  return 0;
}

runCommand(() => run(process.argv.slice(2)));
