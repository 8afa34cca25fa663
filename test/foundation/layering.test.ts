// The layering of issue 9: resolvers are adapter-neutral. No module under src/resolvers/ imports
// Fastify, GraphQL, or anything of the HTTP adapters (src/rest/, src/http/, src/graphql/).
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../src");

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...(await sources(p)));
    else if (e.name.endsWith(".ts")) out.push(p);
  }
  return out;
}

const FORBIDDEN = [/^fastify$/, /^@fastify\//, /^graphql(-yoga)?$/, /\/rest\//, /\/http\//, /\/graphql\//];

describe("layering", () => {
  it("no module under src/resolvers imports an HTTP adapter or its framework", async () => {
    const offenders: string[] = [];
    for (const file of await sources(path.join(src, "resolvers"))) {
      const text = await readFile(file, "utf8");
      for (const m of text.matchAll(/(?:import|export)[^"']*?from\s+["']([^"']+)["']/g)) {
        const spec = m[1]!;
        if (FORBIDDEN.some((re) => re.test(spec))) offenders.push(`${path.relative(src, file)} → ${spec}`);
      }
    }
    expect(offenders).toEqual([]);
  });
});
