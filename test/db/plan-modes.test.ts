// Plan choice per statement (src/db/connection.ts), on PostgreSQL (PGlite has no plan modes the
// service sets): a statement that asks for a generic plan gets one, planned once on its
// connection; every other statement, and every transaction, still plans each execution with its
// values (force_custom_plan), whatever the connection served before. Counted by PostgreSQL itself
// (pg_prepared_statements' generic_plans and custom_plans, per session), on a pool of one
// connection so that every statement meets the same session.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres } from "../../src/db/database.ts";
import type { Services } from "../../src/services.ts";
import type { Database } from "../../src/types.ts";
import { createTestServices, TEST_DATABASE_URL } from "../helpers/env.ts";
import { planCacheMode, preparedPlans } from "../helpers/plans.ts";

const LOOKUP = `SELECT $1::int + 1 AS "NEXT"`;
const READ = `SELECT count(*)::int AS "N" FROM generate_series(1, $1::int)`;

if (TEST_DATABASE_URL)
  describe("plan modes (postgres)", () => {
    let services: Services;
    let db: Database;
    let own: { close(): Promise<void> };

    /** How the session planned the prepared statement of `text` so far (a query of its own). */
    const plans = (text: string) => preparedPlans(db, text);
    const mode = planCacheMode;

    beforeAll(async () => {
      // Plans per session: not through a PgBouncer.
      services = await createTestServices("postgres", { databaseDirect: true });
      if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      const handle = openPostgres(services.db.connectionString, { max: 1 });
      db = own = handle;
    });
    afterAll(async () => {
      await own?.close();
      await services?.close();
    });

    it("plans a statement that asks for a generic plan once, and keeps the plan", async () => {
      for (let i = 0; i < 3; i++) {
        const { rows } = await db.query<{ NEXT: number }>(LOOKUP, [i], { prepare: "plans", plan: "generic" });
        expect(rows[0]!.NEXT).toBe(i + 1);
      }
      expect(await plans(LOOKUP)).toEqual({ generic: 3, custom: 0 });
    });

    it("plans every other statement with its values, also right after a generic one", async () => {
      await db.query(LOOKUP, [1], { prepare: "plans", plan: "generic" });
      const { rows } = await db.query<{ N: number }>(READ, [7], { prepare: "plans" });
      expect(rows[0]!.N).toBe(7);
      await db.query(LOOKUP, [2], { prepare: "plans", plan: "generic" });
      await db.query(READ, [9], { prepare: "plans" });
      expect(await plans(READ)).toEqual({ generic: 0, custom: 2 });
      expect(await mode(db)).toBe("force_custom_plan");
    });

    it("begins every transaction with custom plans, whatever the connection served before", async () => {
      await db.query(LOOKUP, [3], { prepare: "plans", plan: "generic" });
      const before = await plans(LOOKUP);
      await db.transaction(async (tx) => {
        expect(await mode(tx)).toBe("force_custom_plan");
        // Inside a transaction a generic plan is not given (a SET there could be rolled back).
        await tx.query(LOOKUP, [4], { prepare: "plans", plan: "generic" });
        await tx.query(READ, [3], { prepare: "plans" });
      });
      const after = await plans(LOOKUP);
      expect(after.generic - before.generic).toBe(0);
      expect(after.custom - before.custom).toBe(1);
    });

    it("keeps track of the mode across a rolled-back transaction and a failed statement", async () => {
      await db.query(LOOKUP, [5], { prepare: "plans", plan: "generic" });
      await expect(
        db.transaction(async (tx) => {
          await tx.query(READ, [2], { prepare: "plans" });
          throw new Error("rolled back");
        }),
      ).rejects.toThrow("rolled back");
      // A generic statement that fails (pg's pool then drops its connection: the next one is new).
      await expect(
        db.query(`SELECT 1 / ($1::int - $1::int) AS "X"`, [1], { prepare: "plans", plan: "generic" }),
      ).rejects.toThrow(/division by zero/);
      const before = await plans(READ);
      await db.query(READ, [4], { prepare: "plans" });
      expect(await plans(READ)).toEqual({ generic: before.generic, custom: before.custom + 1 });
      const lookup = await plans(LOOKUP);
      await db.query(LOOKUP, [6], { prepare: "plans", plan: "generic" });
      expect(await plans(LOOKUP)).toEqual({ generic: lookup.generic + 1, custom: lookup.custom });
    });
  });
