// graphql-yoga is loaded on the first request the fast path leaves to it (src/graphql/plugin.ts):
// a process whose GraphQL clients only POST known-good JSON never loads it. Checked on the service
// as `npm start` runs it, with a resolve hook that records every module the process loads.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginOverHttp } from "../helpers/auth.ts";
import { type DemoService, startDemoService } from "../helpers/process.ts";

const HOOK = fileURLToPath(new URL("../helpers/record-imports.mjs", import.meta.url));
const QUERY = `{ PO(source: "purchasing-1", limit: 1) { data { PO_ID } } }`;

describe("graphql-yoga on demand", () => {
  let service: DemoService;
  let base: string;
  let token: string;
  const loaded = async () => (await readFile(path.join(service.dir, "imports.txt"), "utf8")).split("\n");

  beforeAll(async () => {
    service = await startDemoService(
      (dir) => ({ RECORD_IMPORTS: path.join(dir, "imports.txt") }),
      ["--import", HOOK],
    );
    base = service.base;
    token = await loginOverHttp(base, "olga", "olga-demo-1");
  });
  afterAll(async () => {
    await service?.stop();
  });

  it("a POST the fast path answers does not load it; the first GET does, and is answered", async () => {
    const post = await fetch(`${base}/graphql`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ query: QUERY }),
    });
    expect(post.status).toBe(200);
    expect(((await post.json()) as { data: { PO: { data: unknown[] } } }).data.PO.data).toHaveLength(1);
    expect(await loaded()).toContain("fastify");
    expect(await loaded()).not.toContain("graphql-yoga");

    const get = await fetch(`${base}/graphql?query=${encodeURIComponent(QUERY)}`, {
      headers: { authorization: `Bearer ${token}`, accept: "application/json" },
    });
    expect(get.status).toBe(200);
    expect(((await get.json()) as { data: { PO: { data: unknown[] } } }).data.PO.data).toHaveLength(1);
    expect(await loaded()).toContain("graphql-yoga");
  });
});
