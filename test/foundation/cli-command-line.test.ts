// Every command of `npm run` (src/cli/*, readCommandLine in src/cli/command.ts) reads its command
// line before it opens anything: --help and -h print what it does, its arguments and options (exit
// 0); an unknown option or a wrong number of arguments is refused with one line naming it and the
// usage (exit 2). Neither touches a database: a fresh embedded one (DATA_DIR) stays an empty
// directory, a fresh PostgreSQL database (DATABASE_URL) gets no table, not even the migrations'.
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DatabaseHandle } from "../../src/db/database.ts";
import { printFixtureSchema } from "../../src/schema/print.ts";
import { createTestDatabase, DEMO_FIXTURE, TEST_DATABASE_URL } from "../helpers/env.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** The CLI as its npm script runs it (node --import tsx), standard output and error apart. */
function runCli(script: string, args: string[], env: Record<string, string>): Promise<RunResult> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(DATABASE_URL.*|DATABASE_READ_URL.*|DATA_DIR|ROLE|PORT|JWT_SECRET)$/.test(k))
      base[k] = v;
  }
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", `src/cli/${script}`, ...args],
      { cwd: ROOT, env: { ...base, LOG_LEVEL: "warn", ...env }, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

/** Runs each command line, two at a time (each loads the project's modules through tsx). */
async function runAll(script: string, lines: string[][], env: Record<string, string>): Promise<RunResult[]> {
  const results: RunResult[] = new Array(lines.length);
  let next = 0;
  const worker = async () => {
    for (let i = next++; i < lines.length; i = next++) results[i] = await runCli(script, lines[i]!, env);
  };
  await Promise.all([worker(), worker()]);
  return results;
}

const SCRIPTS = {
  migrate: { file: "migrate.ts", usage: "usage: npm run migrate [-- --help]" },
  import: { file: "import.ts", usage: "usage: npm run import -- FILE.json [--reset]" },
  "tenant:move": { file: "tenant-move.ts", usage: "usage: npm run tenant:move -- TENANT PROFILE|main" },
  export: {
    file: "export.ts",
    usage: "usage: npm run export -- TENANT DIM [--format=csv|ndjson|json] [name=value …]",
  },
  "schema:print": {
    file: "schema-print.ts",
    usage: "usage: npm run schema:print [-- FIXTURE.json | --user=USER_ID]",
  },
} as const;

describe("the commands' command lines: help and refusals, nothing touched", () => {
  let dataDir: string;
  let pg: DatabaseHandle | null = null;
  let env: Record<string, string>;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "dimensio-cli-line-"));
    // A fresh PostgreSQL database when there is one: the commands would migrate it on opening.
    pg = TEST_DATABASE_URL ? await createTestDatabase("postgres") : null;
    env = {
      DATA_DIR: dataDir,
      DEMO_DATA: "false",
      ...(pg?.kind === "postgres" ? { DATABASE_URL: pg.connectionString } : {}),
    };
  });
  afterAll(async () => {
    await pg?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  /** Neither database was opened: the embedded one's directory is empty, PostgreSQL's has no table. */
  async function untouched(): Promise<void> {
    expect(await readdir(dataDir)).toEqual([]);
    if (!pg) return;
    const tables = await pg.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`,
    );
    expect(tables.rows).toEqual([]);
  }

  function expectHelp(r: RunResult, usage: string, what: string): void {
    expect(r.code, `${what}: ${r.stderr}`).toBe(0);
    expect(r.stderr, what).toBe("");
    const lines = r.stdout.trim().split("\n");
    expect(lines[0], what).toBe(usage);
    expect(lines.length, what).toBeGreaterThan(3);
    expect(r.stdout, what).toContain("Arguments:");
    expect(r.stdout, what).toContain("--help (-h)");
  }

  function expectRefusal(r: RunResult, usage: string, message: string, what: string): void {
    expect(r.code, `${what}: ${r.stdout}${r.stderr}`).toBe(2);
    expect(r.stdout, what).toBe("");
    expect(r.stderr.trimEnd().split("\n"), what).toEqual([message, usage]);
  }

  it("npm run migrate: --help and -h describe it; an option or an argument is refused; no migration applied", {
    timeout: 300_000,
  }, async () => {
    const { file, usage } = SCRIPTS.migrate;
    const [help, h, bogus, extra] = await runAll(file, [["--help"], ["-h"], ["--bogus"], ["now"]], env);
    expectHelp(help!, usage, "--help");
    expect(help!.stdout).toContain("Applies the SQL migrations");
    expect(h!.stdout).toBe(help!.stdout);
    expectRefusal(bogus!, usage, "Unknown option --bogus. The only option is --help.", "--bogus");
    expectRefusal(extra!, usage, "Expected no argument, got 1: now.", "now");
    await untouched();
  });

  it("npm run import: --rest (not --reset) and a wrong number of files are refused, nothing imported", {
    timeout: 300_000,
  }, async () => {
    const { file, usage } = SCRIPTS.import;
    const [help, h, rest, none, two] = await runAll(
      file,
      [
        ["--help"],
        ["-h"],
        ["fixtures/sample.json", "--rest"],
        [],
        ["fixtures/sample.json", "fixtures/sample.json"],
      ],
      env,
    );
    expectHelp(help!, usage, "--help");
    expect(help!.stdout).toContain("--reset");
    expect(h!.stdout).toBe(help!.stdout);
    expectRefusal(rest!, usage, "Unknown option --rest. The options are --reset and --help.", "--rest");
    expectRefusal(none!, usage, "Expected 1 argument, got 0.", "no file");
    expectRefusal(
      two!,
      usage,
      "Expected 1 argument, got 2: fixtures/sample.json fixtures/sample.json.",
      "two files",
    );
    await untouched();
  });

  it("npm run tenant:move: --dry-run is refused, not a move; --help says every process needs the profile", {
    timeout: 300_000,
  }, async () => {
    const { file, usage } = SCRIPTS["tenant:move"];
    const [help, h, dryRun, one, three] = await runAll(
      file,
      [["--help"], ["-h"], ["globex", "eu", "--dry-run"], ["globex"], ["globex", "eu", "main"]],
      env,
    );
    expectHelp(help!, usage, "--help");
    // The move cannot see the serving processes' configuration: its help says what to do first.
    expect(help!.stdout.replace(/\s+/g, " ")).toContain(
      "configure that profile (DATABASE_URL_<PROFILE>) in EVERY process serving the service and restart them",
    );
    expect(help!.stdout).toContain("There is no dry run.");
    expect(h!.stdout).toBe(help!.stdout);
    expectRefusal(dryRun!, usage, "Unknown option --dry-run. The only option is --help.", "--dry-run");
    expectRefusal(one!, usage, "Expected 2 arguments, got 1: globex.", "one argument");
    expectRefusal(three!, usage, "Expected 2 arguments, got 3: globex eu main.", "three arguments");
    await untouched();
  });

  it("npm run export: -h as --help; a wrong number of arguments refused before the database", {
    timeout: 300_000,
  }, async () => {
    const { file, usage } = SCRIPTS.export;
    const [help, h, one, format] = await runAll(
      file,
      [["--help"], ["-h"], ["acme", "sort=NAME"], ["acme", "CUST", "--format"]],
      env,
    );
    expectHelp(help!, usage, "--help");
    expect(help!.stdout).toContain("Writes every record of the tenant's dimension");
    expect(h!.stdout).toBe(help!.stdout);
    expectRefusal(one!, usage, "Expected 2 arguments, got 1: acme.", "one argument");
    expectRefusal(format!, usage, "The option --format takes a value: --format=….", "--format");
    await untouched();
  });

  it("npm run schema:print: without a file, the demo data set's full schema; --help; refusals", {
    timeout: 300_000,
  }, async () => {
    const { file, usage } = SCRIPTS["schema:print"];
    const [help, h, demo, bogus, two, missing] = await runAll(
      file,
      [["--help"], ["-h"], [], ["--all"], ["a.json", "b.json"], ["no-such-fixture.json"]],
      env,
    );
    expectHelp(help!, usage, "--help");
    expect(help!.stdout).toContain("the full, administrator's schema");
    expect(h!.stdout).toBe(help!.stdout);
    // As README says: the full schema, here of the demo data set `npm start` serves.
    expect(demo!.code, demo!.stderr).toBe(0);
    expect(demo!.stdout).toBe(`${printFixtureSchema(JSON.parse(await readFile(DEMO_FIXTURE, "utf8")))}\n`);
    expect(demo!.stdout).toContain("PO_create(");
    expectRefusal(bogus!, usage, "Unknown option --all. The options are --user=USER_ID and --help.", "--all");
    expectRefusal(two!, usage, "Expected at most 1 argument, got 2: a.json b.json.", "two files");
    expect(missing!.code).toBe(1);
    expect(missing!.stderr).toContain("no-such-fixture.json: ENOENT");
    await untouched();
  });

  it("the refusal is no accident of a missing database: a plain `npm run migrate` migrates the same one", {
    timeout: 300_000,
  }, async () => {
    if (!pg) return;
    const r = await runCli(SCRIPTS.migrate.file, [], env);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^Applied: 0001_init/);
    const applied = await pg.query(`SELECT 1 FROM "_dimensio_migrations"`);
    expect(applied.rows.length).toBeGreaterThan(0);
  });
});
