// The import command (src/cli/import.ts), run as a child process the way `npm run import -- FILE`
// runs it: against a fresh PostgreSQL database (DATABASE_URL) or an embedded one (DATA_DIR).
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseHandle, openPglite } from "../../src/db/database.ts";
import { readFixtureFile } from "../../src/fixtures/import.ts";
import { type Backend, BACKENDS, createTestDatabase, SAMPLE_FIXTURE } from "../helpers/env.ts";

const ROOT = path.resolve(import.meta.dirname, "../..");
const TSX_CLI = path.join(ROOT, "node_modules/tsx/dist/cli.mjs");

interface RunResult {
  code: number;
  stdout: string;
  stderr: string;
}

function runImport(args: string[], env: Record<string, string>): Promise<RunResult> {
  const base: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v !== undefined && !/^(DATABASE_URL|DATA_DIR|ROLE|PORT|JWT_SECRET)$/.test(k)) base[k] = v;
  }
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      [TSX_CLI, "src/cli/import.ts", ...args],
      { cwd: ROOT, env: { ...base, ...env }, timeout: 120_000 },
      (err, stdout, stderr) => {
        const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
        resolve({ code, stdout, stderr });
      },
    );
  });
}

async function count(db: DatabaseHandle, table: string): Promise<number> {
  return (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "${table}"`)).rows[0]!.n;
}

/** Where the CLI writes, and a handle to look at it afterwards. */
interface Target {
  env: Record<string, string>;
  /** Opens the database for inspection (PGlite: only while no CLI runs). */
  open(): Promise<DatabaseHandle>;
  release(db: DatabaseHandle): Promise<void>;
  dispose(): Promise<void>;
}

async function target(backend: Backend, dir: string): Promise<Target> {
  if (backend === "postgres") {
    const db = await createTestDatabase("postgres");
    if (db.kind !== "postgres") throw new Error("expected postgres");
    return {
      env: { DATABASE_URL: db.connectionString, DATA_DIR: dir },
      open: async () => db,
      release: async () => {},
      dispose: () => db.close(),
    };
  }
  return {
    env: { DATA_DIR: dir },
    open: () => openPglite(path.join(dir, "pgdata")),
    release: (db) => db.close(),
    dispose: async () => {},
  };
}

describe.each(BACKENDS)("npm run import (src/cli/import.ts) on %s", (backend) => {
  let dir: string;
  let t: Target;
  let brokenFile: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dimensio-cli-"));
    t = await target(backend, dir);
    const broken = structuredClone(
      (await readFixtureFile(SAMPLE_FIXTURE)) as Record<string, Array<Record<string, unknown>>>,
    );
    broken.TB_VAR![3]!.DATA_TYPE = "BLOB";
    broken.TB_COST!.push({ COD_DIM: "CUST", NUM_COST: 200, COD_VAR: "NO_SUCH_FIELD" });
    broken.TB_MENU![3] = { ...broken.TB_MENU![3]!, NLEFT: 4, NRIGHT: 7 };
    broken.TB_OBJECT!.push({
      COD_DIM: "CUST",
      COD_VAR: "SALES_REP",
      COD_DIM_OBJ: "GHOST",
      COD_VAR_OBJ: "G_ID",
    });
    brokenFile = path.join(dir, "broken.json");
    await writeFile(brokenFile, JSON.stringify(broken));
  });
  afterAll(async () => {
    await t?.dispose();
    await rm(dir, { recursive: true, force: true });
  });

  it("refuses a broken file with a non-zero exit code, printing every problem, writing nothing", async () => {
    const res = await runImport([brokenFile], t.env);
    expect(res.code).toBe(1);
    // The refusal's code first, then every field it names (src/cli/command.ts).
    expect(res.stderr).toMatch(/^INVALID_METADATA: /);
    expect(res.stderr).toContain("  - TB_VAR[3].DATA_TYPE: ");
    expect(res.stderr).toContain("TB_VAR[3].DATA_TYPE");
    expect(res.stderr).toContain("TB_COST[46].COD_VAR");
    expect(res.stderr).toContain("TB_OBJECT[8].COD_DIM_OBJ");
    expect(res.stderr).toMatch(/TB_MENU\[\d+\]/);
    const db = await t.open();
    try {
      expect(await count(db, "TB_DIM")).toBe(0);
      expect(await count(db, "TB_USER")).toBe(0);
    } finally {
      await t.release(db);
    }
  });

  it("loads the sample fixture with exit code 0", async () => {
    const res = await runImport([SAMPLE_FIXTURE], t.env);
    expect(res.stderr).not.toMatch(/Error/);
    expect(res.code).toBe(0);
    expect(res.stdout).toContain("records created: 28 (insert-cascade children included)");
    const db = await t.open();
    try {
      expect(await count(db, "TB_DIM")).toBe(8);
      expect(await count(db, "TB_USER")).toBe(4);
      expect(await count(db, "TB_ANAG_CUST00")).toBe(5);
      expect(await count(db, "TB_DOC_ORDL00")).toBe(2);
      expect(await count(db, "TB_ANAG_OUTBOX00")).toBe(28);
      const hash = await db.query<{ PASSWORD_HASH: string }>(
        `SELECT "PASSWORD_HASH" FROM "TB_USER" WHERE "USER_ID" = 'anna'`,
      );
      expect(hash.rows[0]!.PASSWORD_HASH).toMatch(/^scrypt\$/);
    } finally {
      await t.release(db);
    }
  });

  it("--reset reloads: ids restart", async () => {
    const db0 = await t.open();
    try {
      await db0.query(
        `INSERT INTO "TB_ANAG_CUST00" ("CODE", "NAME", "TENANT_ID") VALUES ('X', 'Extra', 'acme')`,
      );
    } finally {
      await t.release(db0);
    }
    const reset = await runImport([SAMPLE_FIXTURE, "--reset"], t.env);
    expect(reset.code).toBe(0);
    expect(reset.stdout).toContain("records created: 28 (insert-cascade children included)");
    const db = await t.open();
    try {
      const ids = await db.query<{ CUST_ID: number }>(`SELECT "CUST_ID" FROM "TB_ANAG_CUST00" ORDER BY 1`);
      expect(ids.rows.map((r) => r.CUST_ID)).toEqual([1, 2, 3, 4, 5]);
    } finally {
      await t.release(db);
    }
  });

  it("without a file it prints the usage and exits non-zero", async () => {
    const res = await runImport([], t.env);
    expect(res.code).not.toBe(0);
    expect(res.stderr).toContain("usage: npm run import -- FILE.json [--reset]");
  });
});
