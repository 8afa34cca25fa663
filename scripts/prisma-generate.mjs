// Runs `prisma generate` without a downloaded schema engine: generate does not need one,
// but the CLI insists on a binary path, so any executable file satisfies it.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";

const env = { ...process.env };
if (!env.PRISMA_SCHEMA_ENGINE_BINARY) env.PRISMA_SCHEMA_ENGINE_BINARY = process.execPath;
const cli = "node_modules/prisma/build/index.js";
// `npm install --package-lock-only` runs this script with nothing installed: nothing to generate.
if (!existsSync("prisma/schema.prisma") || !existsSync(cli)) process.exit(0);
execFileSync(process.execPath, [cli, "generate"], { stdio: "inherit", env });
