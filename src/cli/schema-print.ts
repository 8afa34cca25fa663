// `npm run schema:print [-- FIXTURE.json]`: prints the GraphQL SDL of a fixture's metadata, the
// full, administrator's schema (every dimension, mutation and field; a user's own schema is a part
// of it, decisions "A GraphQL schema per access profile"). Without a file, the bundled demo data
// set's (src/demo/demo-fixture.json: what `npm start` serves on an empty database). No database is
// read or opened.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { projectRoot } from "../paths.ts";
import { printFixtureSchema } from "../schema/print.ts";
import { readCommandLine, runCommand } from "./command.ts";

/** The demo data set `npm start` loads into an empty database (src/demo/load-demo.ts). */
const DEMO_FIXTURE = path.join(projectRoot(), "src/demo/demo-fixture.json");

const SPEC = {
  usage: "usage: npm run schema:print [-- FIXTURE.json]",
  help: [
    "Prints the GraphQL schema (SDL, types and fields sorted) that the service builds from a",
    "fixture's metadata: the full, administrator's schema, every dimension, mutation and field (a",
    "user's schema is the part of it their access profile may use). Reads no database.",
    "Arguments: FIXTURE.json, a fixture (fixtures/fixture-format.md), optional: without it, the demo",
    "data set's schema (src/demo/demo-fixture.json, what `npm start` serves on an empty database).",
    "Options: --help (-h), this text.",
    "Exit: 0 printed; 1 the file unreadable or its metadata invalid; 2 misused (an unknown option or",
    "more than one file).",
  ],
  args: [0, 1],
} as const;

async function run(argv: string[]): Promise<number> {
  const line = readCommandLine(SPEC, argv);
  if (typeof line === "number") return line;
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
  // Written whole before the process exits (a pipe may take it in parts).
  await new Promise<void>((resolve, reject) =>
    process.stdout.write(`${sdl}\n`, (err) => (err ? reject(err) : resolve())),
  );
  return 0;
}

runCommand(() => run(process.argv.slice(2)));
