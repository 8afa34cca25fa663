// tenant:move (issue 36 §2, decisions.md §18): a tenant's rows move to another database while a
// client writes continuously; its writes are refused with 503 TENANT_MOVING and Retry-After
// during the move, its reads go on; afterwards every acknowledged write is in the new database
// exactly once, nothing of the tenant is left in the old one, and every write's event was
// published exactly once.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { OutboxMessage } from "../../src/events/bus.ts";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { moveTenant, TenantMoveError } from "../../src/tenant-move.ts";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import {
  createTestApp,
  SAMPLE_FIXTURE,
  TEST_DATABASE_URL,
  TEST_JWT_SECRET,
  type TestApp,
} from "../helpers/env.ts";
import { spawnScript } from "../helpers/process.ts";
import { eventually } from "../events/support.ts";
import { readFixtureFile } from "../../src/fixtures/import.ts";
import { createProfileDatabase, type ProfileDatabase } from "./helpers.ts";

if (TEST_DATABASE_URL)
  describe("tenant:move (postgres)", () => {
    let eu: ProfileDatabase;
    let t: TestApp;
    let runtime: EventRuntime;
    let greta: string;
    const feed: OutboxMessage[] = [];
    /** The copy's reads of the source (main): its cursor's pages. */
    const fetches: string[] = [];
    beforeAll(async () => {
      eu = await createProfileDatabase();
      t = await createTestApp("postgres", {
        onStatement: (text) => {
          if (text.startsWith("FETCH ")) fetches.push(text);
        },
        fixture: (await readFixtureFile(SAMPLE_FIXTURE)) as Record<string, unknown>,
        env: { ...UNLIMITED_ENV, DATABASE_URL_EU: eu.url },
      });
      await t.services.feed.listen((m) => feed.push(m));
      runtime = await startEventRuntime(t.services, { relay: true, subscribers: true });
      greta = await loginAs(t.app, "greta", "greta-secret-4");
    });
    afterAll(async () => {
      await runtime?.stop();
      await t?.close();
      await eu?.drop();
    });

    const write = (id: string) =>
      t.app.inject({
        method: "POST",
        url: "/api/v4/core/CITY?source=anag-3",
        headers: bearer(greta),
        payload: { data: { CITY_ID: id, NAME: id, COUNTRY: "CH" } },
      });
    const read = () =>
      t.app.inject({
        method: "GET",
        url: "/api/v4/core/CITY?source=anag-3&$num_rows=1000",
        headers: bearer(greta),
      });

    it("refuses a target that is not a profile, and the database the tenant is in", async () => {
      await expect(moveTenant(t.services, "globex", "mars")).rejects.toThrow(
        new TenantMoveError(
          "mars is not a configured database profile (set DATABASE_URL_MARS), nor main; configured: main, EU.",
        ),
      );
      await expect(moveTenant(t.services, "globex", "main")).rejects.toThrow(
        "Tenant globex is in main already.",
      );
      await expect(moveTenant(t.services, "nobody", "EU")).rejects.toThrow("Tenant nobody does not exist.");
    });

    it("moves a tenant under continuous writes: every acknowledged write and every event exactly once", async () => {
      const acknowledged: string[] = [];
      const refused: Array<{ status: number; code: string; retryAfter: unknown }> = [];
      let writing = true;
      let n = 0;
      const writer = async () => {
        while (writing) {
          const id = `MV-${n++}`;
          const res = await write(id);
          if (res.statusCode === 201) acknowledged.push(id);
          else
            refused.push({
              status: res.statusCode,
              code: res.json().code,
              retryAfter: res.headers["retry-after"],
            });
        }
      };
      // A row of globex the target already holds (a leftover, or another deployment's): replaced by
      // the copy, and the move says so.
      await eu.query(
        `INSERT INTO "TB_ANAG_CITY00" ("TENANT_ID", "CITY_ID", "NAME", "COUNTRY", "TREC") VALUES ('globex', 'STRAY', 'Stray', 'CH', 'N')`,
      );
      const writers = [writer(), writer()];
      await eventually(() => acknowledged.length >= 5);
      let during: { write: number; code: string; retryAfter: unknown; read: number } | null = null;
      const result = await moveTenant(t.services, "globex", "EU", {
        settleMs: 100,
        // Pages of 3 rows: every table of the tenant is copied over several pages of the cursor.
        pageRows: 3,
        onStep: async (step) => {
          if (step !== "checking the copy") return;
          // Between the copy and the switch: writes refused with Retry-After, reads served.
          const w = await write("MV-FENCED");
          const r = await read();
          during = {
            write: w.statusCode,
            code: w.json().code,
            retryAfter: w.headers["retry-after"],
            read: r.statusCode,
          };
        },
      });
      const afterMove = acknowledged.length;
      await eventually(() => acknowledged.length >= afterMove + 5);
      writing = false;
      await Promise.all(writers);

      expect(result).toMatchObject({
        tenant: "globex",
        from: null,
        to: "EU",
        replaced: { TB_ANAG_CITY00: 1 },
      });
      expect(await eu.query(`SELECT 1 FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'STRAY'`)).toEqual([]);
      // More rows than a page: the copy read the source 3 rows at a time and left none out (below).
      expect(result.copied.TB_ANAG_CITY00).toBeGreaterThan(3);
      expect(fetches.length).toBeGreaterThan(result.copied.TB_ANAG_CITY00! / 3);
      expect(new Set(fetches)).toEqual(new Set(["FETCH 3 FROM move_rows"]));
      expect(during).toEqual({ write: 503, code: "TENANT_MOVING", retryAfter: "2", read: 200 });
      // Every refusal was the fence's, nothing else went wrong.
      for (const r of refused) expect(r).toEqual({ status: 503, code: "TENANT_MOVING", retryAfter: "2" });

      // The tenant lives in EU now; nothing of it is left in main.
      expect(
        (
          await t.services.db.query(
            `SELECT "DATABASE", "MOVING_SINCE" FROM "TB_TENANT" WHERE "TENANT_ID" = 'globex'`,
          )
        ).rows,
      ).toEqual([{ DATABASE: "EU", MOVING_SINCE: null }]);
      const inEu = await eu.query<{ CITY_ID: string; n: number }>(
        `SELECT "CITY_ID", count(*)::int AS n FROM "TB_ANAG_CITY00" WHERE "TENANT_ID" = 'globex' GROUP BY 1`,
      );
      const euIds = new Map(inEu.map((r) => [r.CITY_ID, r.n]));
      for (const id of acknowledged) expect(euIds.get(id), id).toBe(1);
      expect(euIds.has("MV-FENCED")).toBe(false);
      // The fixture's 4 cities of globex moved too.
      expect(inEu.length).toBe(acknowledged.length + 4);
      for (const table of ["TB_ANAG_CITY00", "TB_ANAG_CUST00", "TB_ANAG_OUTBOX00"])
        expect(
          (
            await t.services.db.query(
              `SELECT count(*)::int AS n FROM "${table}" WHERE "TENANT_ID" = 'globex'`,
            )
          ).rows,
        ).toEqual([{ n: 0 }]);
      expect(
        (
          await t.services.db.query(
            `SELECT count(*)::int AS n FROM "TB_ANAG_CITY00" WHERE "TENANT_ID" = 'acme'`,
          )
        ).rows,
      ).toEqual([{ n: 4 }]);

      // Reads after the move come from EU, whole.
      const after = await read();
      expect(after.statusCode).toBe(200);
      expect(after.json().data).toHaveLength(acknowledged.length + 4);

      // Every acknowledged write's event was published, once.
      const created = () =>
        feed.filter((m) => m.EVENT_TYPE === "CITYCreated" && m.AGGREGATE_ID.startsWith("MV-"));
      await eventually(() => new Set(created().map((m) => m.AGGREGATE_ID)).size === acknowledged.length, {
        what: "every acknowledged write's event",
      });
      const perRecord = new Map<string, number>();
      for (const m of created()) perRecord.set(m.AGGREGATE_ID, (perRecord.get(m.AGGREGATE_ID) ?? 0) + 1);
      expect([...perRecord.entries()].filter(([, count]) => count !== 1)).toEqual([]);
      expect([...perRecord.keys()].sort()).toEqual([...acknowledged].sort());
    });

    it("moves it back to main, with its webhooks", async () => {
      const hook = await t.app.inject({
        method: "POST",
        url: "/api/v4/webhooks",
        headers: bearer(greta),
        payload: { url: "https://hooks.example.com/in", events: ["CITYCreated"] },
      });
      expect(hook.statusCode, hook.body).toBe(201);
      const before = (await read()).json().data.length as number;
      const result = await moveTenant(t.services, "globex", "main", { settleMs: 50 });
      expect(result).toMatchObject({ from: "EU", to: null });
      expect(result.copied.TB_WEBHOOK).toBe(1);
      expect(
        (await t.services.db.query(`SELECT "DATABASE" FROM "TB_TENANT" WHERE "TENANT_ID" = 'globex'`)).rows,
      ).toEqual([{ DATABASE: null }]);
      expect((await read()).json().data).toHaveLength(before);
      const hooks = await t.app.inject({ method: "GET", url: "/api/v4/webhooks", headers: bearer(greta) });
      expect(hooks.json().data.map((h: { url: string }) => h.url)).toEqual(["https://hooks.example.com/in"]);
      expect(await eu.query(`SELECT count(*)::int AS n FROM "TB_ANAG_CITY00"`)).toEqual([{ n: 0 }]);
      expect(await eu.query(`SELECT count(*)::int AS n FROM "TB_WEBHOOK"`)).toEqual([{ n: 0 }]);
      expect((await write("MV-BACK")).statusCode).toBe(201);
    });

    it("npm run tenant:move: another process moves it; this one follows through NOTIFY", async () => {
      const env = {
        DATABASE_URL: (t.services.db as { connectionString: string }).connectionString,
        DATABASE_URL_EU: eu.url,
        JWT_SECRET: TEST_JWT_SECRET,
        DEMO_DATA: "false",
      };
      const bad = spawnScript("src/cli/tenant-move.ts", ["globex", "mars"], env);
      expect(await bad.exited).toBe(1);
      expect(bad.output()).toContain("mars is not a configured database profile (set DATABASE_URL_MARS)");
      const before = (await read()).json().data.length as number;
      const cli = spawnScript("src/cli/tenant-move.ts", ["globex", "eu"], env);
      const code = await cli.exited;
      expect(code, cli.output()).toBe(0);
      expect(cli.output()).toContain("Moved tenant globex from main to EU.");
      // This process was told by the database, not by the move.
      await eventually(() => t.services.profiles.placement("globex").profile === "EU");
      expect((await read()).json().data).toHaveLength(before);
      expect((await write("MV-CLI")).statusCode).toBe(201);
      expect(await eu.query(`SELECT "TENANT_ID" FROM "TB_ANAG_CITY00" WHERE "CITY_ID" = 'MV-CLI'`)).toEqual([
        { TENANT_ID: "globex" },
      ]);
    });

    it("a move interrupted after its switch is finished by running it again: the fence is lifted", async () => {
      // As a move that stopped between the switch and the fence's end leaves it (globex is in EU).
      await t.services.db.query(`UPDATE "TB_TENANT" SET "MOVING_SINCE" = now() WHERE "TENANT_ID" = 'globex'`);
      await eventually(() => t.services.profiles.placement("globex").moving);
      const refused = await write("MV-HELD");
      expect(refused.statusCode).toBe(503);
      expect(refused.json().code).toBe("TENANT_MOVING");
      const result = await moveTenant(t.services, "globex", "EU");
      expect(result).toMatchObject({ from: "EU", to: "EU", eventsMoved: 0 });
      expect((await write("MV-FREE")).statusCode).toBe(201);
    });
  });
