// `npm start` end to end: the service as a child process on an empty embedded database loads the
// demo data and prints its logins once, answers /readyz, stops cleanly on SIGTERM, and on the next
// start finds its data again (PGlite in DATA_DIR persists) without loading the demo twice.
import { access, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SAMPLE_FIXTURE, TEST_DATABASE_URL } from "../helpers/env.ts";
import {
  freePort,
  type Running,
  spawnScript,
  spawnStart,
  startCommand,
  startDemoService,
  waitReady,
} from "../helpers/process.ts";

/** As `npm start` runs it (scripts/start.mjs: the bundle, then plain node). */
function start(env: Record<string, string>): Running {
  return spawnStart(env);
}

async function login(base: string, username: string, password: string) {
  const res = await fetch(`${base}/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ username, password }),
  });
  return { status: res.status, body: (await res.json()) as { data?: { access_token: string } } };
}

describe("npm start on the embedded database", () => {
  let dir: string;
  let port: number;
  let base: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dimensio-start-"));
    port = await freePort();
    base = `http://127.0.0.1:${port}`;
  });
  afterAll(async () => {
    await rm(dir, { recursive: true, force: true });
  });

  it("first start: demo data loaded, logins printed, ready, stops on SIGTERM with exit 0", async () => {
    const running = start({ DATA_DIR: dir, PORT: String(port) });
    try {
      await waitReady(base, running);
      expect(running.output()).toContain("Demo data loaded");
      expect(running.output()).toMatch(/olga\s+olga-demo-1\s+tenant roastery, peso 1/);
      const olga = await login(base, "olga", "olga-demo-1");
      expect(olga.status).toBe(200);
      const res = await fetch(`${base}/api/v4/core/PO?source=purchasing-1`, {
        headers: { authorization: `Bearer ${olga.body.data!.access_token}` },
      });
      expect(res.status).toBe(200);
      expect(((await res.json()) as { meta: { total: number } }).meta.total).toBe(2);

      // The embedded database is this process's: an import at the same time is refused, clearly.
      const importer = spawnScript("src/cli/import.ts", [SAMPLE_FIXTURE], { DATA_DIR: dir });
      expect(await importer.exited).toBe(1);
      expect(importer.output()).toMatch(/is in use by process \d+ .*DATABASE_URL/);
    } finally {
      running.child.kill("SIGTERM");
    }
    expect(await running.exited).toBe(0);
  });

  it("second start: the data is still there and the demo is not loaded again", async () => {
    const running = start({ DATA_DIR: dir, PORT: String(port) });
    try {
      await waitReady(base, running);
      expect(running.output()).not.toContain("Demo data loaded");
      const kai = await login(base, "kai", "kai-demo-4");
      expect(kai.status).toBe(200);
      const res = await fetch(`${base}/api/v4/core/SUPP?source=master-1`, {
        headers: { authorization: `Bearer ${kai.body.data!.access_token}` },
      });
      expect(((await res.json()) as { meta: { total: number } }).meta.total).toBe(1);
    } finally {
      running.child.kill("SIGTERM");
    }
    expect(await running.exited).toBe(0);
  });

  it("a bad setting stops start-up with a message naming the variable", async () => {
    const running = start({ DATA_DIR: dir, PORT: "eighty" });
    expect(await running.exited).toBe(1);
    expect(running.output()).toContain("PORT");
  });

  it("a ROLE missing its settings stops start-up before anything is opened or loaded", async () => {
    const fresh = path.join(dir, "role-check");
    const running = start({ DATA_DIR: fresh, ROLE: "gateway", GATEWAY_SECRET: "s" });
    expect(await running.exited).toBe(1);
    expect(running.output()).toContain("READ_BACKEND_URL: required when ROLE=gateway");
    expect(running.output()).not.toContain("Demo data loaded");
    await expect(access(fresh)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("an unreachable or missing database is one line that says what to do", async () => {
    const refused = start({ DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" });
    expect(await refused.exited).toBe(1);
    expect(refused.output()).toMatch(
      /^Cannot use the database of DATABASE_URL \(.*\): nothing listens there: is PostgreSQL running\?\.$/m,
    );
    expect(refused.output()).not.toMatch(/\n\s+at /);
  });

  if (TEST_DATABASE_URL) {
    it("a database that does not exist is one line telling to create it", async () => {
      const url = new URL(TEST_DATABASE_URL!);
      url.pathname = "/dimensio_no_such_database";
      const missing = start({ DATABASE_URL: url.toString() });
      expect(await missing.exited).toBe(1);
      expect(missing.output()).toMatch(/the database does not exist: create it first \(createdb NAME\)\.$/m);
    });
  }
});

describe("the image runs the service as npm start does", () => {
  it("with the same V8 flags (package.json's start script, deploy/Dockerfile's CMD)", async () => {
    const startFlags = startCommand().filter((arg) => arg.startsWith("--"));
    const dockerfile = path.join(import.meta.dirname, "..", "..", "deploy", "Dockerfile");
    const cmd = /^CMD (\[.*\])$/m.exec(await readFile(dockerfile, "utf8"));
    expect(cmd).not.toBeNull();
    const imageFlags = (JSON.parse(cmd![1]!) as string[]).filter((arg) => arg.startsWith("--"));
    expect(imageFlags).toEqual(startFlags);
    // docs/decisions.md: request-scoped objects of GraphQL writes were pretenured without it.
    expect(startFlags).toContain("--no-allocation-site-pretenuring");
  });
});

describe("npm start's NODE_ENV", () => {
  const HOOK = fileURLToPath(new URL("../helpers/record-node-env.mjs", import.meta.url));

  async function nodeEnvOf(nodeEnv: string): Promise<string> {
    const service = await startDemoService(
      (dir) => ({ NODE_ENV: nodeEnv, RECORD_NODE_ENV: path.join(dir, "node-env.txt") }),
      ["--import", HOOK],
    );
    const file = path.join(service.dir, "node-env.txt");
    service.running.child.kill("SIGTERM");
    await service.running.exited;
    try {
      return await readFile(file, "utf8");
    } finally {
      await service.stop();
    }
  }

  // One start each (a start loads the demo data: a few seconds, many more on a loaded machine).
  it("is production when the environment leaves it unset, as in the image", async () => {
    expect(await nodeEnvOf("")).toBe("production");
  });
  it("an explicit one is kept", async () => {
    expect(await nodeEnvOf("development")).toBe("development");
  });
});
