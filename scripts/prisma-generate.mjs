// Runs `prisma generate` without a downloaded schema engine: generate does not need one,
// but the CLI insists on a binary path, so any executable file satisfies it.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";

const env = { ...process.env };
if (!env.PRISMA_SCHEMA_ENGINE_BINARY) env.PRISMA_SCHEMA_ENGINE_BINARY = process.execPath;
if (!existsSync("prisma/schema.prisma")) process.exit(0);
execFileSync(process.execPath, ["node_modules/prisma/build/index.js", "generate"], { stdio: "inherit", env });
