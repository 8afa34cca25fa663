// The API roles of a split deployment (ROLE=read, write, auth) at start-up. Each is a process of its
// own, and they must share one database: without DATABASE_URL each opened a private PGlite in its
// DATA_DIR (a record written through the write process was never read through the read one, a
// login's session never found), so src/main.ts refuses them, naming the variable, before anything
// is opened. ROLE=read and write without AMQP_URL start, warned that their GraphQL subscriptions
// get no events (the in-process bus is fed only by a relay in the same process, and they run none).
import { access, mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig, startupWarnings } from "../../src/config.ts";
import type { DatabaseHandle } from "../../src/db/database.ts";
import { createTestDatabase, TEST_DATABASE_URL, TEST_JWT_SECRET } from "../helpers/env.ts";
import { freePort, type Running, spawnScript, waitReady } from "../helpers/process.ts";

/** Resolves once the process has printed `text` (its log is written as it goes). */
function printed(running: Running, text: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const check = () => {
      if (running.output().includes(text)) resolve();
    };
    running.child.stdout?.on("data", check);
    running.child.stderr?.on("data", check);
    running.child.once("exit", () => reject(new Error(`exited without printing it:\n${running.output()}`)));
    check();
  });
}

const SPLIT = { GATEWAY_SECRET: "the-shared-secret", JWT_SECRET: TEST_JWT_SECRET };
const REFUSAL =
  "DATABASE_URL: required when ROLE is read, write or auth (the processes of a split deployment share one PostgreSQL; on the embedded database each would have a private one of its own)";

describe("a split API role's database", () => {
  it("a process opening its own database is refused ROLE=read, write or auth without DATABASE_URL, the variable named", () => {
    for (const role of ["read", "write", "auth"]) {
      let problems: string[] = [];
      try {
        loadConfig({ ...SPLIT, ROLE: role }, { opensDatabase: true });
      } catch (err) {
        expect(err).toBeInstanceOf(ConfigError);
        problems = (err as ConfigError).problems;
      }
      expect(problems, role).toEqual([REFUSAL]);
      // With the shared PostgreSQL named, it starts.
      const config = loadConfig(
        { ...SPLIT, ROLE: role, DATABASE_URL: "postgres://u@db:5432/app" },
        { opensDatabase: true },
      );
      expect(config.role).toBe(role);
    }
  });

  it("ROLE=all keeps its embedded default, and an app handed its database (opts.db) needs no URL", () => {
    expect(loadConfig({}, { opensDatabase: true }).databaseUrl).toBeNull();
    expect(loadConfig({ ...SPLIT, ROLE: "write" }).role).toBe("write");
  });

  it("the refusal is listed with the other bad settings", () => {
    let problems: string[] = [];
    try {
      loadConfig({ ROLE: "read", GATEWAY_SECRET: "s", PORT: "eighty" }, { opensDatabase: true });
    } catch (err) {
      problems = (err as ConfigError).problems;
    }
    expect(problems).toEqual([
      'PORT: must be a whole number >= 0, got "eighty"',
      REFUSAL,
      expect.stringMatching(/^JWT_SECRET: required when ROLE is read, write or auth/),
    ]);
  });

  it("src/main.ts with ROLE=write and no DATABASE_URL stops with the one line, before its DATA_DIR is made", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "dimensio-split-"));
    try {
      const fresh = path.join(dir, "data");
      const running = spawnScript("src/main.ts", [], { ...SPLIT, ROLE: "write", DATA_DIR: fresh });
      expect(await running.exited).toBe(1);
      expect(running.output()).toContain(REFUSAL);
      expect(running.output()).not.toMatch(/\n\s+at /);
      await expect(access(fresh)).rejects.toMatchObject({ code: "ENOENT" });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe("a split API role's event bus", () => {
  it("ROLE=read and write without AMQP_URL are warned that their subscriptions get no events", () => {
    for (const role of ["read", "write"] as const) {
      expect(startupWarnings({ role, amqpUrl: null })).toEqual([
        `ROLE=${role} without AMQP_URL: GraphQL subscriptions on this process receive no events (the in-process event bus is fed only by a relay in the same process, and ROLE=${role} runs none); set AMQP_URL to the RabbitMQ the relay (ROLE=relay) publishes to`,
      ]);
      expect(startupWarnings({ role, amqpUrl: "amqp://mq" })).toEqual([]);
    }
    // The auth role serves no subscription (the gateway sends it /auth only); ROLE=all runs its relay.
    for (const role of ["auth", "all", "relay", "webhooks", "gateway"] as const)
      expect(startupWarnings({ role, amqpUrl: null }), role).toEqual([]);
  });

  // Defined where PostgreSQL runs (no skipped tests).
  if (TEST_DATABASE_URL)
    describe("as a process (PostgreSQL)", () => {
      let db: DatabaseHandle & { connectionString: string };
      let dir: string;
      beforeAll(async () => {
        dir = await mkdtemp(path.join(tmpdir(), "dimensio-split-"));
        db = (await createTestDatabase("postgres", { direct: true })) as DatabaseHandle & {
          connectionString: string;
        };
      });
      afterAll(async () => {
        await db?.close();
        await rm(dir, { recursive: true, force: true });
      });

      it("ROLE=write on the shared PostgreSQL without AMQP_URL starts and logs the warning", async () => {
        const port = await freePort();
        const running = spawnScript("src/main.ts", [], {
          ...SPLIT,
          ROLE: "write",
          DATA_DIR: dir,
          DEMO_DATA: "false",
          PORT: String(port),
          DATABASE_URL: db.connectionString,
        });
        try {
          await waitReady(`http://127.0.0.1:${port}`, running);
          await printed(
            running,
            "ROLE=write without AMQP_URL: GraphQL subscriptions on this process receive no events",
          );
        } finally {
          running.child.kill("SIGTERM");
        }
        expect(await running.exited).toBe(0);
      }, 90_000);
    });
});
