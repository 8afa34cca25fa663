// `npm start` end to end: the service as a child process on an empty embedded database loads the
// demo data and prints its logins once, answers /readyz, stops cleanly on SIGTERM, and on the next
// start finds its data again (PGlite in DATA_DIR persists) without loading the demo twice.
import { access, mkdtemp, readFile, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createServer } from "node:net";
import { describeStartupError } from "../../src/cli/startup-error.ts";
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
      expect(((await res.json()) as { meta: { total: number } }).meta.total).toBe(3);

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
      /^Cannot use the database of DATABASE_URL \(.*\): nothing listens there: is PostgreSQL running\?$/m,
    );
    expect(refused.output()).not.toMatch(/\n\s+at /);
  });

  it("bad settings found at once are listed together before anything is opened: past a maximum, an unreadable JWT_PUBLIC_KEYS, a ROLE without what it needs", async () => {
    const fresh = path.join(dir, "bounds-check");
    const running = start({
      DATA_DIR: fresh,
      STATEMENT_TIMEOUT_MS: "3000000000",
      JWT_PUBLIC_KEYS: path.join(dir, "nonexistent.json"),
      ROLE: "relay",
    });
    expect(await running.exited).toBe(1);
    const output = running.output();
    expect(output).toContain('STATEMENT_TIMEOUT_MS: must be between 100 and 2147483647, got "3000000000"');
    expect(output).toContain(
      `JWT_PUBLIC_KEYS: cannot read a JWKS from ${path.join(dir, "nonexistent.json")} (no such file)`,
    );
    expect(output).toMatch(/ROLE: relay runs apart .*; not set: DATABASE_URL, AMQP_URL/);
    expect(output).not.toMatch(/\n\s+at /);
    expect(output).not.toContain("Demo data loaded");
    await expect(access(fresh)).rejects.toMatchObject({ code: "ENOENT" });
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

describe("start-up errors of the HTTP server name HOST or PORT, not DATABASE_URL", () => {
  /** The error of listening on `host`:`port`, as the server meets it. */
  async function listenError(host: string, port: number): Promise<NodeJS.ErrnoException> {
    const server = net.createServer();
    try {
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen({ host, port }, resolve);
      });
    } catch (err) {
      return err as NodeJS.ErrnoException;
    } finally {
      server.close();
    }
    throw new Error(`listening on ${host}:${port} succeeded`);
  }

  it("HOST naming no host of this machine, or an address it does not have", async () => {
    const unknown = await listenError("not-a-host.invalid", 0);
    expect(describeStartupError(unknown, { HOST: "not-a-host.invalid" })).toMatch(
      /^Cannot listen on HOST not-a-host\.invalid \(PORT 8080\): getaddrinfo E[A-Z_]+ not-a-host\.invalid; the host name .*: set HOST to .*\.$/,
    );
    const foreign = await listenError("192.0.2.1", 0);
    expect(describeStartupError(foreign, { HOST: "192.0.2.1", PORT: "0" })).toMatch(
      /^Cannot listen on HOST 192\.0\.2\.1 \(PORT 0\): listen EADDRNOTAVAIL.*; no network interface .* set HOST to .*\.$/,
    );
  });

  it("PORT in use by another process", async () => {
    const busy = net.createServer();
    await new Promise<void>((resolve) => busy.listen({ host: "127.0.0.1", port: 0 }, resolve));
    const port = (busy.address() as net.AddressInfo).port;
    try {
      const inUse = await listenError("127.0.0.1", port);
      expect(describeStartupError(inUse, { HOST: "127.0.0.1", PORT: String(port) })).toBe(
        `Cannot listen on PORT ${port} (HOST 127.0.0.1): ${inUse.message}; another process listens on that port: stop it, or set PORT to a free one.`,
      );
    } finally {
      busy.close();
    }
  });

  it("a database host that does not resolve is still DATABASE_URL's", async () => {
    const client = new pg.Client({ connectionString: "postgres://nobody@not-a-db-host.invalid:5432/none" });
    const err = await client.connect().then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toMatchObject({ syscall: "getaddrinfo" });
    const message = describeStartupError(err, { HOST: "not-a-host.invalid" });
    expect(message).toMatch(
      /^Cannot use the database of DATABASE_URL \(getaddrinfo E[A-Z_]+ not-a-db-host\.invalid\)/,
    );
    expect(message).not.toMatch(/\.\.$|\?\.$/);
  });

  it("a DATABASE_URL port where another service listens (it resets, closes or stays silent) is named too", async () => {
    // Real servers on loopback that are not PostgreSQL: one resets, one closes, one never answers.
    const behaviours: Array<(socket: import("node:net").Socket) => void> = [
      (socket) => socket.resetAndDestroy(),
      (socket) => socket.once("data", () => socket.end()),
      () => {},
    ];
    for (const behave of behaviours) {
      const server = createServer(behave);
      await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
      const { port } = server.address() as import("node:net").AddressInfo;
      // A pool with a connect timeout, as the service opens it (src/db/pool.ts).
      const pool = new pg.Pool({
        connectionString: `postgres://nobody@127.0.0.1:${port}/none`,
        connectionTimeoutMillis: 300,
      });
      const err = await pool.query("SELECT 1").then(
        () => null,
        (e: unknown) => e,
      );
      await pool.end().catch(() => {});
      server.close();
      const message = describeStartupError(err, {});
      expect(message).toMatch(/^Cannot use the database of DATABASE_URL \(.+\): .*PostgreSQL's .*\?$/);
    }
  });
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

  it("with the CLIs' tools installed: under the image's NODE_ENV=production, npm ci includes dev dependencies", async () => {
    const root = path.join(import.meta.dirname, "..", "..");
    const dockerfile = await readFile(path.join(root, "deploy", "Dockerfile"), "utf8");
    const pkg = JSON.parse(await readFile(path.join(root, "package.json"), "utf8"));
    // The CLIs (migrate, import, export, tenant:move) run through tsx, the postinstall through prisma:
    // dev dependencies, which npm ci leaves out under NODE_ENV=production unless told.
    expect(pkg.scripts.import).toContain("--import tsx");
    expect(Object.keys(pkg.devDependencies)).toEqual(expect.arrayContaining(["tsx", "prisma"]));
    expect(dockerfile).toMatch(/^ENV NODE_ENV=production$/m);
    expect(dockerfile).toMatch(/^RUN npm ci --include=dev\b/m);
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
