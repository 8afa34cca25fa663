// The repository stands alone (issue 8): a plain clone has no shared folder beside it, so nothing the
// project runs, tests or tells a newcomer to use may refer to it.
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const SCANNED = ["src", "test", "bench", "scripts", "examples", "README.md", "package.json", ".ci"];
const TEXT = /\.(ts|mts|js|mjs|cjs|json|md|yml|yaml|sql|sh)$|^run$/;

async function files(rel: string): Promise<string[]> {
  const abs = path.join(root, rel);
  const entries = await readdir(abs, { withFileTypes: true }).catch(() => null);
  if (!entries) return TEXT.test(path.basename(rel)) ? [rel] : [];
  const out: string[] = [];
  for (const e of entries) {
    if (e.name === "node_modules" || e.name === "generated") continue;
    out.push(...(await files(path.join(rel, e.name))));
  }
  return out;
}

describe("the repository stands alone", () => {
  it("no source, test, bench, script or README line refers to the shared folder outside", async () => {
    const offenders: string[] = [];
    const needle = ["..", "shared"].join("/");
    for (const top of SCANNED) {
      for (const rel of await files(top)) {
        const text = await readFile(path.join(root, rel), "utf8").catch(() => "");
        text.split("\n").forEach((line, i) => {
          if (line.includes(needle)) offenders.push(`${rel}:${i + 1}: ${line.trim()}`);
        });
      }
    }
    expect(offenders).toEqual([]);
  });

  it("carries the sample fixture it tests with", async () => {
    const sample = JSON.parse(await readFile(path.join(root, "fixtures/sample.json"), "utf8"));
    expect(Object.keys(sample)).toEqual(expect.arrayContaining(["tenants", "TB_DIM", "users"]));
  });
});
