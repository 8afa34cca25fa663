// The service split into its roles, each a child process of its own on loopback (src/main.ts with a
// ROLE, as a deployment of many processes runs it), on one new PostgreSQL database with the sample
// data: for the end-to-end tests of a gateway in front of its backends.
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { beforeEach } from "vitest";
import type { Services } from "../../src/services.ts";
import { UNLIMITED_ENV } from "./auth.ts";
import { createTestServices, TEST_JWT_SECRET } from "./env.ts";
import { freePort, type Running, spawnScript, stopRunning, waitReady } from "./process.ts";

export type Role = "gateway" | "read" | "write" | "auth" | "relay" | "webhooks";

export interface TopologyOptions {
  /**
   * One process per role. A gateway needs write and auth; its reads go to read, or to write where
   * no read process is started.
   */
  roles: Role[];
  /** For every process (e.g. REDIS_URL). */
  env?: Record<string, string>;
  /** For the processes of a role only (e.g. AMQP_URL for those that write or relay events). */
  roleEnv?: Partial<Record<Role, Record<string, string>>>;
}

export interface Topology {
  /** The database the processes share (the sample data), for a test to read. */
  services: Services;
  /** GATEWAY_SECRET of every process: what a backend takes a request from the gateway by. */
  secret: string;
  url: (role: Role) => string;
  port: (role: Role) => number;
  processes: Partial<Record<Role, Running>>;
  /** Every process's output so far, under its role. */
  logs: () => string;
  /** SIGTERM to every process still running, their exits awaited, the database and DATA_DIR removed. */
  stop: () => Promise<void>;
}

const SECRET = "gateway-shared-secret-for-topology-tests";

/** The processes of `roles` started and ready; if one is not, all are stopped and its logs thrown. */
export async function startTopology({ roles, env = {}, roleEnv = {} }: TopologyOptions): Promise<Topology> {
  if (roles.includes("gateway") && !(roles.includes("write") && roles.includes("auth")))
    throw new Error(`a gateway needs write and auth backends; the roles are ${roles.join(", ")}`);
  const services = await createTestServices("postgres", { fixture: "sample" });
  const dataDir = await mkdtemp(path.join(tmpdir(), "dimensio-topology-"));
  const ports: Partial<Record<Role, number>> = {};
  for (const role of roles) ports[role] = await freePort();
  const port = (role: Role) => {
    const p = ports[role];
    if (p === undefined) throw new Error(`no ${role} process in this topology`);
    return p;
  };
  const url = (role: Role) => `http://127.0.0.1:${port(role)}`;
  const db = services.db.kind === "postgres" ? services.db.connectionString : "";
  const common = {
    GATEWAY_SECRET: SECRET,
    JWT_SECRET: TEST_JWT_SECRET,
    DATA_DIR: dataDir,
    DEMO_DATA: "false",
    ...UNLIMITED_ENV,
    ...env,
  };
  const processes: Partial<Record<Role, Running>> = {};
  // The backends first: the gateway is the one process without a database of its own.
  for (const role of roles.filter((r) => r !== "gateway"))
    processes[role] = spawnScript("src/main.ts", [], {
      ...common,
      ...roleEnv[role],
      ROLE: role,
      PORT: String(port(role)),
      DATABASE_URL: db,
    });
  if (roles.includes("gateway"))
    processes.gateway = spawnScript("src/main.ts", [], {
      ...common,
      ...roleEnv.gateway,
      ROLE: "gateway",
      PORT: String(port("gateway")),
      READ_BACKEND_URL: url(roles.includes("read") ? "read" : "write"),
      WRITE_BACKEND_URL: url("write"),
      AUTH_BACKEND_URL: url("auth"),
    });
  const started = Object.entries(processes) as [Role, Running][];
  const logs = () => started.map(([role, p]) => `--- ROLE=${role} ---\n${p.output()}`).join("\n");
  const stop = async () => {
    await Promise.all(started.map(([, p]) => stopRunning(p)));
    await services.close();
    await rm(dataDir, { recursive: true, force: true });
  };
  try {
    await Promise.all(
      started.map(([role, p]) =>
        waitReady(url(role), p).catch((err: Error) => {
          throw new Error(`ROLE=${role}: ${err.message.split("\n")[0]}`);
        }),
      ),
    );
  } catch (err) {
    await stop();
    throw new Error(`${(err as Error).message}\n${logs()}`);
  }
  return { services, secret: SECRET, url, port, processes, logs, stop };
}

/**
 * Every process's output on stderr after a failed test of this suite: what went wrong behind the
 * gateway is told in a backend's log. `topology` is read then (it is started in a beforeAll).
 */
export function printLogsOnFailure(topology: () => Topology | undefined): void {
  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => {
      const running = topology();
      if (running) process.stderr.write(`${running.logs()}\n`);
    });
  });
}
