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
import { openServices } from "../../src/services.ts";
import { BACKENDS, createTestDatabase, SAMPLE_FIXTURE, TEST_JWT_SECRET } from "../helpers/env.ts";
import { spawnScript } from "../helpers/process.ts";

describe.each(BACKENDS)("npm run export (%s)", (backend) => {
  it("writes a tenant's dimension as CSV or NDJSON, with list parameters", { timeout: 300_000 }, async () => {
    // The database the CLI opens: a PGlite directory, or a fresh PostgreSQL database.
    const dataDir = await mkdtemp(path.join(tmpdir(), "dimensio-export-"));
    const pg = backend === "postgres" ? await createTestDatabase("postgres") : null;
    const env: Record<string, string> = {
      DATA_DIR: dataDir,
      JWT_SECRET: TEST_JWT_SECRET,
      DEMO_DATA: "false",
      ...(pg && pg.kind === "postgres" ? { DATABASE_URL: pg.connectionString } : {}),
    };
    let open: { close(): Promise<void> } | null = null;
    try {
      const services = await openServices(loadConfig({ ...env, LOG_LEVEL: "silent" }), {
        logger: createLogger("silent"),
        ...(pg ? { db: pg } : {}),
      });
      await importFixture(services, await readFixtureFile(SAMPLE_FIXTURE));
      // PGlite's directory belongs to one process at a time: closed before the CLI opens it.
      if (pg) open = services;
      else await services.close();
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
      if (!pg) return;
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
      // Closing the services closes (and drops) the PostgreSQL test database.
      await (open ?? pg)?.close();
    }
  });
});
