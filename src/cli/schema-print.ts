// `npm run schema:print -- FIXTURE.json`: prints the GraphQL SDL for a fixture's metadata.
import { readFile } from "node:fs/promises";
import { printFixtureSchema } from "../schema/print.ts";

async function run(): Promise<void> {
  const file = process.argv[2];
  if (!file) throw new Error("usage: npm run schema:print -- FIXTURE.json");
  process.stdout.write(`${printFixtureSchema(JSON.parse(await readFile(file, "utf8")))}\n`);
}

run().catch((err) => {
  console.error(err instanceof Error ? err.message : String(err));
  process.exit(1);
});
