// The service as a child process (node + tsx, as `npm start` runs it), for end-to-end tests.
import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createServer } from "node:net";
import path from "node:path";
import { pathToFileURL } from "node:url";

const ROOT = path.resolve(import.meta.dirname, "../..");
/** Preloaded into every spawned process: it ends when its parent (the test's worker) is gone. */
const EXIT_WITH_PARENT = pathToFileURL(path.join(import.meta.dirname, "exit-with-parent.mjs")).href;

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export interface Running {
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** A TypeScript entry point of the project (a CLI, or src/main.ts with a ROLE) through tsx. */
export function spawnScript(script: string, args: string[], env: Record<string, string>): Running {
  // node --import tsx, not tsx's CLI: that CLI relays signals and SIGKILLs a child that has not
  // acknowledged a SIGTERM within ~60 ms, which a loaded machine misses.
  return spawnNode(["--import", "tsx", script, ...args], env);
}

function spawnNode(argv: string[], env: Record<string, string>): Running {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(DATABASE_URL|DATABASE_READ_URL|REDIS_URL|AMQP_URL|ROLE|JWT_SECRET)$/.test(k))
      base[k] = v;
  }
  const child = spawn(process.execPath, ["--import", EXIT_WITH_PARENT, ...argv], {
    cwd: ROOT,
    env: { ...base, LOG_LEVEL: "warn", HOST: "127.0.0.1", TEST_PARENT_PID: String(process.pid), ...env },
  });
  let out = "";
  child.stdout.on("data", (d) => {
    out += String(d);
  });
  child.stderr.on("data", (d) => {
    out += String(d);
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return { child, output: () => out, exited };
}

/** SIGTERM to a process still running; resolves with its exit code once it has exited. */
export function stopRunning(running: Running): Promise<number | null> {
  if (running.child.exitCode === null) running.child.kill("SIGTERM");
  return running.exited;
}

/** `npm start`'s command line (package.json): `node`, its flags, then the script. */
export function startCommand(): string[] {
  const manifest = JSON.parse(readFileSync(path.join(ROOT, "package.json"), "utf8")) as {
    scripts: { start: string };
  };
  const argv = manifest.scripts.start.replace(/^exec\s+/, "").split(/\s+/);
  if (argv[0] !== "node") throw new Error(`npm start runs ${argv[0]}, not node`);
  return argv;
}

/**
 * The service exactly as `npm start` runs it (scripts/start.mjs: the bundle under plain node),
 * with the node flags of package.json's start script and `nodeArgs` (e.g. --cpu-prof for a bench)
 * before its script.
 */
export function spawnStart(env: Record<string, string>, nodeArgs: string[] = []): Running {
  const argv = startCommand();
  return spawnNode([...argv.slice(1, -1), ...nodeArgs, ...argv.slice(-1)], env);
}

export async function waitReady(base: string, running: Running): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(`${base}/readyz`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    if (running.child.exitCode !== null) throw new Error(`the service exited:\n${running.output()}`);
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`the service did not become ready:\n${running.output()}`);
}

export interface DemoService {
  base: string;
  running: Running;
  /** Its data directory (the embedded database, media). */
  dir: string;
  /** SIGTERM, its exit awaited, its data directory removed. */
  stop: () => Promise<void>;
}

/**
 * `npm start` on the embedded database with its demo data, in a data directory of its own under
 * the system's temporary directory, on a free port, ready: what a newcomer runs. `env` may be
 * made from that directory (files a test reads afterwards, removed with it).
 */
export async function startDemoService(
  env: Record<string, string> | ((dir: string) => Record<string, string>) = {},
  nodeArgs: string[] = [],
): Promise<DemoService> {
  const dir = await mkdtemp(path.join(tmpdir(), "dimensio-demo-"));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const settings = typeof env === "function" ? env(dir) : env;
  const running = spawnStart({ DATA_DIR: path.join(dir, "data"), PORT: String(port), ...settings }, nodeArgs);
  const stop = async () => {
    await stopRunning(running);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    await waitReady(base, running);
  } catch (err) {
    await stop();
    throw err;
  }
  return { base, running, dir, stop };
}
