// `npm run schema:print -- --user=USER_ID` (src/cli/schema-print.ts, src/cli/user-schema.ts): the
// schema a user is served (their access profile's: docs/decisions.md, "A GraphQL schema per access
// profile"), from the database's metadata and the user's grants and peso: the same SDL as that
// user's own introspection over HTTP, the full schema for an administrator; an unknown user is
// refused (exit 1), a misused command line before anything is opened (exit 2).
import { execFile } from "node:child_process";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import {
  buildClientSchema,
  getIntrospectionQuery,
  type IntrospectionQuery,
  lexicographicSortSchema,
  printSchema,
} from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { userSchema } from "../../src/cli/user-schema.ts";
import { loadConfig } from "../../src/config.ts";
import { NotFoundError } from "../../src/errors.ts";
import { importFixture, readFixtureFile } from "../../src/fixtures/import.ts";
import { createLogger } from "../../src/logger.ts";
import { printFixtureSchema } from "../../src/schema/print.ts";
import { openServices, type Services } from "../../src/services.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import {
  createTestApp,
  createTestDatabase,
  SAMPLE_FIXTURE,
  TEST_DATABASE_URL,
  TEST_JWT_SECRET,
  type TestApp,
} from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { graphqlClient } from "./helpers.ts";

type Fixture = Parameters<typeof importFixture>[1];

const ROOT = path.resolve(import.meta.dirname, "../..");

/** The SDL of the schema `token`'s user is served, from their introspection over HTTP. */
async function introspectedSdl(t: TestApp, token: string): Promise<string> {
  const reply = await graphqlClient(t.app, token)(getIntrospectionQuery());
  expect(reply.status).toBe(200);
  return printSchema(lexicographicSortSchema(buildClientSchema(reply.body.data as IntrospectionQuery)));
}

describe("the schema a user is served (userSchema)", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("is the user's own introspected schema: lucia's lacks what her profile hides, anna's is the full one", async () => {
    const lucia = await userSchema(t.services, "lucia");
    expect(lucia).toMatchObject({ tenantId: "acme", peso: 3, active: true });
    expect(lucia.sdl).toBe(
      await introspectedSdl(t, await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password)),
    );
    expect(lucia.sdl).toContain("type CUST {");
    expect(lucia.sdl).not.toContain("CREDIT_LIMIT");
    expect(lucia.sdl).not.toContain("type Mutation");

    const anna = await userSchema(t.services, "anna");
    expect(anna.sdl).toBe(await introspectedSdl(t, await loginAs(t.app, "anna", SAMPLE_USERS.anna.password)));
    expect(anna.sdl).toBe(printFixtureSchema(await readFixtureFile(SAMPLE_FIXTURE)));
  });

  it("refuses a user TB_USER does not hold: 404 USER_NOT_FOUND", async () => {
    const refusal = await userSchema(t.services, "nobody").catch((err: unknown) => err);
    expect(refusal).toBeInstanceOf(NotFoundError);
    expect(refusal).toMatchObject({ code: "USER_NOT_FOUND", message: 'No user "nobody" in TB_USER.' });
  });
});

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The CLI as its npm script runs it (node --import tsx), standard output and error apart. */
function runCli(args: string[], env: Record<string, string>): Promise<RunResult> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(DATABASE_URL.*|DATABASE_READ_URL.*|DATA_DIR|ROLE|PORT|JWT_SECRET)$/.test(k))
      base[k] = v;
  }
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "src/cli/schema-print.ts", ...args],
      { cwd: ROOT, env: { ...base, LOG_LEVEL: "warn", ...env }, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

const USAGE = "usage: npm run schema:print [-- FIXTURE.json | --user=USER_ID]";

// On PostgreSQL when there is one (a process opening an embedded database takes 10-60 s on a busy
// host), else on an embedded database, closed before the command opens it.
describe("npm run schema:print -- --user=USER_ID", () => {
  let env: Record<string, string>;
  let expectedLucia: string;
  let close: () => Promise<void> = async () => {};

  beforeAll(async () => {
    const pg = TEST_DATABASE_URL ? await createTestDatabase("postgres") : null;
    env = {
      DATA_DIR: await mkdtemp(path.join(tmpdir(), "dimensio-schema-print-")),
      JWT_SECRET: TEST_JWT_SECRET,
      DEMO_DATA: "false",
      ...(pg?.kind === "postgres" ? { DATABASE_URL: pg.connectionString } : {}),
    };
    let services: Services;
    try {
      services = await openServices(loadConfig({ ...env, LOG_LEVEL: "silent" }), {
        logger: createLogger("silent"),
        ...(pg ? { db: pg } : {}),
      });
    } catch (err) {
      await pg?.close();
      throw err;
    }
    await importFixture(services, (await readFixtureFile(SAMPLE_FIXTURE)) as Fixture);
    expectedLucia = (await userSchema(services, "lucia")).sdl;
    // Closing the services closes (and drops) the PostgreSQL test database: at the end. An
    // embedded one belongs to one process at a time: closed now.
    if (pg) close = () => services.close();
    else await services.close();
  }, 300_000);
  afterAll(async () => {
    await close();
  });

  it("prints the user's schema (a note on standard error); refuses an unknown user with 1", {
    timeout: 300_000,
  }, async () => {
    // One at a time: an embedded database is one process's at a time.
    const lucia = await runCli(["--user=lucia"], env);
    const nobody = await runCli(["--user=nobody"], env);
    expect(lucia.code, lucia.stderr).toBe(0);
    expect(lucia.stdout).toBe(`${expectedLucia}\n`);
    expect(lucia.stdout).not.toContain("CREDIT_LIMIT");
    expect(lucia.stderr).toContain("The schema of user lucia (tenant acme, peso 3).");
    expect(nobody.code).toBe(1);
    expect(nobody.stdout).toBe("");
    expect(nobody.stderr).toContain('USER_NOT_FOUND: No user "nobody" in TB_USER.');
  });

  it.each([
    [
      ["fixtures/sample.json", "--user=lucia"],
      "--user prints a user's schema from the database: give no FIXTURE.json with it.",
    ],
    [["--user=lucia", "--user=anna"], "Give one user (--user=USER_ID once)."],
    [["--user="], "--user takes a user's id (TB_USER.USER_ID): --user=USER_ID."],
    [["--user"], "The option --user takes a value: --user=…."],
  ])("refuses %j with 2, before opening anything", { timeout: 120_000 }, async (args, reason) => {
    const refused = await runCli(args, { ...env, DATABASE_URL: "postgres://nobody@127.0.0.1:1/none" });
    expect(refused).toEqual({ code: 2, stdout: "", stderr: `${reason}\n${USAGE}\n` });
  });
});
