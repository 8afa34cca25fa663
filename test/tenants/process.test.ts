// Databases per tenant in real processes: `npm run import` loads a fixture whose tenant globex
// is on profile EU, `src/main.ts` serves it (relays, webhooks, history retention per database);
// and a start with a tenant naming a profile that is not configured prints one line naming both.
import { writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../events/support.ts";
import { loginOverHttp } from "../helpers/auth.ts";
import { TEST_DATABASE_URL, TEST_JWT_SECRET } from "../helpers/env.ts";
import { freePort, type Running, spawnScript, waitReady } from "../helpers/process.ts";
import { createProfileDatabase, type ProfileDatabase, sampleWithGlobexOn } from "./helpers.ts";

if (TEST_DATABASE_URL)
  describe("databases per tenant in separate processes (postgres)", () => {
    let main: ProfileDatabase;
    let eu: ProfileDatabase;
    let env: Record<string, string>;
    const running: Running[] = [];
    beforeAll(async () => {
      [main, eu] = await Promise.all([createProfileDatabase(), createProfileDatabase()]);
      env = {
        DATABASE_URL: main.url,
        DATABASE_URL_EU: eu.url,
        JWT_SECRET: TEST_JWT_SECRET,
        DEMO_DATA: "false",
      };
      const file = path.join(os.tmpdir(), `dimensio-tenants-${process.pid}.json`);
      await writeFile(file, JSON.stringify(await sampleWithGlobexOn("EU")));
      const imported = spawnScript("src/cli/import.ts", [file], env);
      expect(await imported.exited, imported.output()).toBe(0);
    });
    afterAll(async () => {
      for (const r of running) if (r.child.exitCode === null) r.child.kill("SIGKILL");
      await main?.drop();
      await eu?.drop();
    });

    it("the import put globex's records in EU; the service serves and writes them there", async () => {
      expect(
        await eu.query(`SELECT count(*)::int AS n FROM "TB_ANAG_CITY00" WHERE "TENANT_ID" = 'globex'`),
      ).toEqual([{ n: 4 }]);
      const port = await freePort();
      const service = spawnScript("src/main.ts", [], { ...env, PORT: String(port) });
      running.push(service);
      const base = `http://127.0.0.1:${port}`;
      await waitReady(base, service);
      const health = await (await fetch(`${base}/healthz`)).json();
      expect(health.dependencies).toMatchObject({ database: "up", database_eu: "up" });
      const token = await loginOverHttp(base, "greta", "greta-secret-4");
      const created = await fetch(`${base}/api/v4/core/CITY?source=anag-3`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify({ data: { CITY_ID: "PROC-1", NAME: "Proc", COUNTRY: "CH" } }),
      });
      expect(created.status).toBe(201);
      expect(await eu.query(`SELECT "TENANT_ID" FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'PROC-1'`)).toEqual([
        { TENANT_ID: "globex" },
      ]);
      // The process's relay for EU publishes it: the row is marked in EU's outbox.
      const published = async () =>
        (
          await eu.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_ID" = 'PROC-1' AND "PUBLISHED_AT" IS NOT NULL`,
          )
        )[0]!.n === 1;
      await eventually(published, { what: "EU's outbox row published" });
      service.child.kill("SIGTERM");
      expect(await service.exited).toBe(0);
    });

    it("a tenant naming a profile that is not configured stops the start with one line naming both", async () => {
      await main.query(`INSERT INTO "TB_TENANT" ("TENANT_ID", "DATABASE") VALUES ('lost', 'ARCHIVE')`);
      try {
        const port = await freePort();
        const service = spawnScript("src/main.ts", [], { ...env, PORT: String(port) });
        running.push(service);
        expect(await service.exited).toBe(1);
        expect(service.output()).toContain(
          "Tenant lost names the database profile ARCHIVE (TB_TENANT.DATABASE), which is not configured: set DATABASE_URL_ARCHIVE, or change the tenant's DATABASE.",
        );
        expect(service.output()).not.toMatch(/\n\s+at /);
      } finally {
        await main.query(`DELETE FROM "TB_TENANT" WHERE "TENANT_ID" = 'lost'`);
      }
    });
  });
