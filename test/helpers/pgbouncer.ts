// A PgBouncer of the test's own (Debian's /usr/sbin/pgbouncer, 1.18 here) in front of a given
// PostgreSQL: transaction pooling mode by default, on a free loopback port, with a temporary
// config directory, trust authentication (the user of the PostgreSQL URL, its password passed on
// to the server), a small server pool. Stopped by the test: killed, and waited for until it exits.
// vitest.config.ts runs test/pgbouncer/** only where the binary is found (pgbouncerBinary).
import { type ChildProcess, spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import { chmod, mkdtemp, rm, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";

/** Where PgBouncer is looked for: PGBOUNCER_BIN, then PATH, then Debian's /usr/sbin. */
export function pgbouncerBinary(env: NodeJS.ProcessEnv = process.env): string | null {
  const dirs = [...(env.PATH ?? "").split(path.delimiter).filter(Boolean), "/usr/sbin"];
  const candidates = [
    ...(env.PGBOUNCER_BIN ? [env.PGBOUNCER_BIN] : []),
    ...dirs.map((d) => path.join(d, "pgbouncer")),
  ];
  for (const candidate of candidates) {
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not there
    }
  }
  return null;
}

export interface PgBouncerOptions {
  /** transaction (default) or session. */
  poolMode?: "transaction" | "session";
  /** Server connections per database and user (default 5). */
  poolSize?: number;
}

export interface PgBouncer {
  port: number;
  /** `serverUrl` with its host and port replaced by PgBouncer's (same database, user, password). */
  urlFor(serverUrl: string): string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", resolve);
  });
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Resolves once PgBouncer logs that it listens on `port`; rejects when it exits first. */
function listening(child: ChildProcess, port: number, log: string[]): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => fail(new Error("PgBouncer did not listen within 10 s")), 10_000);
    const onData = (chunk: Buffer) => {
      log.push(chunk.toString());
      if (log.join("").includes(`listening on 127.0.0.1:${port}`)) done();
    };
    const onExit = (code: number | null) => fail(new Error(`PgBouncer exited (${code})`));
    const cleanup = () => {
      clearTimeout(timer);
      child.stderr?.off("data", onData);
      child.stdout?.off("data", onData);
      child.off("exit", onExit);
    };
    const done = () => {
      cleanup();
      // Its log keeps flowing; nobody reads it any more.
      child.stderr?.resume();
      child.stdout?.resume();
      resolve();
    };
    const fail = (err: Error) => {
      cleanup();
      reject(new Error(`${err.message}:\n${log.join("")}`));
    };
    child.stderr?.on("data", onData);
    child.stdout?.on("data", onData);
    child.once("exit", onExit);
  });
}

/** Starts PgBouncer in front of the server of `serverUrl` (its host, port, user and password). */
export async function startPgBouncer(serverUrl: string, opts: PgBouncerOptions = {}): Promise<PgBouncer> {
  const binary = pgbouncerBinary();
  if (!binary)
    throw new Error(
      "PgBouncer is not installed: `apt-get install pgbouncer` (Debian), or PGBOUNCER_BIN=<path> (README, Tests).",
    );
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || "postgres");
  const password = decodeURIComponent(server.password);
  const port = await freePort();
  const dir = await mkdtemp(path.join(tmpdir(), "dimensio-pgbouncer-"));
  // PgBouncer refuses to run as root: as root it is told to switch to `nobody`, who must read this.
  await chmod(dir, 0o755);
  const asRoot = process.getuid?.() === 0;
  const quote = (v: string) => `'${v.replace(/'/g, "''")}'`;
  const target = [
    `host=${server.hostname}`,
    `port=${server.port || 5432}`,
    `user=${user}`,
    ...(password ? [`password=${quote(password)}`] : []),
  ].join(" ");
  const ini = [
    "[databases]",
    // Every database of the server (the tests make one each) under its own name.
    `* = ${target}`,
    "[pgbouncer]",
    "listen_addr = 127.0.0.1",
    `listen_port = ${port}`,
    "unix_socket_dir =",
    "auth_type = trust",
    `auth_file = ${path.join(dir, "users.txt")}`,
    `pool_mode = ${opts.poolMode ?? "transaction"}`,
    `default_pool_size = ${opts.poolSize ?? 5}`,
    "max_client_conn = 500",
    "server_reset_query =",
    "server_login_retry = 1",
    "logfile =",
    "pidfile =",
    "",
  ].join("\n");
  await writeFile(path.join(dir, "pgbouncer.ini"), ini, { mode: 0o644 });
  await writeFile(path.join(dir, "users.txt"), `"${user}" ""\n`, { mode: 0o644 });
  const args = [...(asRoot ? ["-u", "nobody"] : []), path.join(dir, "pgbouncer.ini")];
  const child = spawn(binary, args, { stdio: ["ignore", "pipe", "pipe"] });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const log: string[] = [];
  try {
    await listening(child, port, log);
  } catch (err) {
    child.kill("SIGKILL");
    await exited;
    await rm(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    port,
    urlFor(url) {
      const u = new URL(url);
      u.hostname = "127.0.0.1";
      u.port = String(port);
      return u.toString();
    },
    async stop() {
      // SIGTERM: immediate shutdown (PgBouncer 1.18), its clients' connections closed.
      if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
      await exited;
      await rm(dir, { recursive: true, force: true });
    },
  };
}
