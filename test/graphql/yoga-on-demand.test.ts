// graphql-yoga is loaded on the first request the fast path leaves to it (src/graphql/plugin.ts):
// a process whose GraphQL clients only POST known-good JSON never loads it. Checked on the service
// as `npm start` runs it, with a resolve hook that records every module the process loads.
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { freePort, type Running, spawnStart, waitReady } from "../helpers/process.ts";

const HOOK = fileURLToPath(new URL("../helpers/record-imports.mjs", import.meta.url));
const QUERY = `{ PO(source: "purchasing-1", limit: 1) { data { PO_ID } } }`;

describe("graphql-yoga on demand", () => {
  let dir: string;
  let base: string;
  let running: Running;
  let token: string;
  const loaded = async () => (await readFile(path.join(dir, "imports.txt"), "utf8")).split("\n");

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dimensio-yoga-"));
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    running = spawnStart(
      { DATA_DIR: path.join(dir, "data"), PORT: String(port), RECORD_IMPORTS: path.join(dir, "imports.txt") },
      ["--import", HOOK],
    );
    await waitReady(base, running);
    const login = await fetch(`${base}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "olga", password: "olga-demo-1" }),
    });
    token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
  });
  afterAll(async () => {
    running?.child.kill("SIGTERM");
    await running?.exited;
    await rm(dir, { recursive: true, force: true });
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
