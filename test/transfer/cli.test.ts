// `npm run export -- TENANT DIM` (src/cli/export.ts): a tenant's records on standard output, as
// the export route writes them, on the embedded database and on PostgreSQL.
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { parse as parseCsv } from "csv-parse/sync";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { importFixture, readFixtureFile } from "../../src/fixtures/import.ts";
import { createLogger } from "../../src/logger.ts";
import { openServices, type Services } from "../../src/services.ts";
import { BACKENDS, createTestDatabase, SAMPLE_FIXTURE, TEST_JWT_SECRET } from "../helpers/env.ts";
import { spawnScript } from "../helpers/process.ts";
import { sampleFixtureWith } from "../write/helpers.ts";

type Fixture = Parameters<typeof importFixture>[1];

/**
 * The database an export CLI opens, holding `fixture` (`check` runs on it once imported): a PGlite
 * directory, closed before the CLI opens it (it belongs to one process at a time), or a fresh
 * PostgreSQL database. Its environment, and `close` (which drops the PostgreSQL one).
 */
async function exportDatabase(
  backend: (typeof BACKENDS)[number],
  fixture: Fixture,
  check?: (services: Services) => Promise<void>,
): Promise<{ env: Record<string, string>; close: () => Promise<void> }> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "dimensio-export-"));
  const pg = backend === "postgres" ? await createTestDatabase("postgres") : null;
  const env: Record<string, string> = {
    DATA_DIR: dataDir,
    JWT_SECRET: TEST_JWT_SECRET,
    DEMO_DATA: "false",
    ...(pg && pg.kind === "postgres" ? { DATABASE_URL: pg.connectionString } : {}),
  };
  let open: Services | null = null;
  try {
    const services = await openServices(loadConfig({ ...env, LOG_LEVEL: "silent" }), {
      logger: createLogger("silent"),
      ...(pg ? { db: pg } : {}),
    });
    await importFixture(services, fixture);
    await check?.(services);
    if (pg) open = services;
    else await services.close();
  } catch (err) {
    await pg?.close();
    throw err;
  }
  // Closing the services closes (and drops) the PostgreSQL test database.
  return { env, close: async () => void (await (open ?? pg)?.close()) };
}

describe.each(BACKENDS)("npm run export (%s)", (backend) => {
  it("writes a tenant's dimension as CSV or NDJSON, with list parameters", { timeout: 300_000 }, async () => {
    const { env, close } = await exportDatabase(backend, (await readFixtureFile(SAMPLE_FIXTURE)) as Fixture);
    try {
      const csv = spawnScript("src/cli/export.ts", ["acme", "CUST", "sort=-NAME"], env);
      expect(await csv.exited).toBe(0);
      const records = parseCsv(csv.output(), { columns: true }) as Array<Record<string, string>>;
      expect(records.map((r) => r.NAME)).toEqual([
        "Verdi & Figli",
        "Rossi Srl",
        "Neri Trasporti",
        "Bianchi SpA",
      ]);
      expect(records[1]).toMatchObject({ CUST_ID: "1", CREDIT_LIMIT: "50000", VIP: "true", LDATA: "" });
      // Each run opens the database (PGlite: 10-60 s on a busy host): the others on PostgreSQL only.
      if (backend !== "postgres") return;
      const nd = spawnScript(
        "src/cli/export.ts",
        ["acme", "CUST", "--format=ndjson", "filter[CITY_ID]=MI"],
        env,
      );
      expect(await nd.exited).toBe(0);
      const lines = nd
        .output()
        .trim()
        .split("\n")
        .map((l) => JSON.parse(l));
      expect(lines.map((r) => r.CUST_ID)).toEqual([1, 4]);
      const other = spawnScript("src/cli/export.ts", ["globex", "CUST"], env);
      expect(await other.exited).toBe(0);
      // Another tenant's records only.
      const others = parseCsv(other.output(), { columns: true }) as Array<Record<string, string>>;
      expect(others.length).toBeGreaterThan(0);
      expect(others.map((r) => r.NAME)).not.toContain("Rossi Srl");
      const bad = spawnScript("src/cli/export.ts", ["acme", "NOPE"], env);
      expect(await bad.exited).toBe(1);
    } finally {
      await close();
    }
  });
});

describe("npm run export: every row of a scoped dimension, and what it refuses", () => {
  // One backend (PostgreSQL when there is one): each run of the command opens the database.
  const backend = BACKENDS.at(-1)!;
  it(`reads every row of a ROW_SCOPE dimension; refuses $num_rows, $offset, unknown options and names (${backend})`, {
    timeout: 300_000,
  }, async () => {
    // CUST scoped by centro_dett, its records in three units: the system, in none, sees them all.
    const fixture = await sampleFixtureWith((f) => {
      f.TB_DIM = f.TB_DIM!.map((d) => (d.COD_DIM === "CUST" ? { ...d, ROW_SCOPE: "centro_dett" } : d));
      const records = f.records as unknown as Record<string, Array<{ data: Record<string, unknown> }>>;
      records.CUST!.forEach((r, i) => {
        r.data.CENTRO_DETT = ["MI01", "RM01", "HQ"][i % 3];
      });
    });
    const { env, close } = await exportDatabase(backend, fixture as Fixture, async (services) => {
      const units = await services.db.query<{ CENTRO_DETT: string }>(
        `SELECT DISTINCT "CENTRO_DETT" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme'`,
      );
      expect(units.rows.map((r) => r.CENTRO_DETT).sort()).toEqual(["HQ", "MI01", "RM01"]);
    });
    try {
      // Refused before the database is opened: exit 2, nothing on standard output but the reason.
      const refusals = await Promise.all(
        [
          ["$num_rows=1"],
          ["$offset=2"],
          ["--fields=NAME"],
          ["debug=true"],
          ["source=anag-1"],
          ["--format=xml"],
        ].map(async (args) => {
          const run = spawnScript("src/cli/export.ts", ["acme", "CUST", ...args], env);
          return { args, code: await run.exited, output: run.output() };
        }),
      );
      for (const { args, code, output } of refusals) {
        expect(code, args.join(" ")).toBe(2);
        expect(output, args.join(" ")).not.toMatch(/CUST_ID,/);
      }
      const [numRows, offset, option, debug, unknown, format] = refusals.map((r) => r.output);
      expect(numRows).toMatch(/^INVALID_PARAMETER: An export has no row limit nor pages/m);
      expect(offset).toMatch(/^INVALID_PARAMETER: An export has no row limit nor pages/m);
      expect(option).toContain(
        "Unknown option --fields=NAME. The options are --format=csv|ndjson|json and --help",
      );
      expect(debug).toMatch(/^INVALID_PARAMETER: An export's body is the rows alone/m);
      expect(unknown).toContain("Unknown parameter source.");
      expect(format).toContain("The format is csv, ndjson, json; got 'xml'.");
      // Every record of the tenant, whatever its unit; list parameters still apply.
      const all = spawnScript("src/cli/export.ts", ["acme", "CUST", "sort=NAME"], env);
      expect(await all.exited).toBe(0);
      const records = parseCsv(all.output(), { columns: true }) as Array<Record<string, string>>;
      expect(records.map((r) => r.NAME)).toEqual([
        "Bianchi SpA",
        "Neri Trasporti",
        "Rossi Srl",
        "Verdi & Figli",
      ]);
      if (backend !== "postgres") return;
      const nd = spawnScript(
        "src/cli/export.ts",
        ["acme", "CUST", "--format=ndjson", "fields=CUST_ID", "filter[CITY_ID]=MI"],
        env,
      );
      expect(await nd.exited).toBe(0);
      expect(
        nd
          .output()
          .trim()
          .split("\n")
          .map((l) => JSON.parse(l)),
      ).toEqual([{ CUST_ID: 1 }, { CUST_ID: 4 }]);
    } finally {
      await close();
    }
  });
});
