// A statement the server refuses keeps its connection (src/db/pool.ts, onItsOwn): pg-pool's own
// query() closes the connection after any error, so that every refused statement sent on its own
// (a value PostgreSQL rejects, a key already taken, a statement timeout) would cost the next
// statement a new backend. On a pool of one connection, the
// backend's pid says whether the next statement met the same session; a lost connection is still
// closed.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres } from "../../src/db/database.ts";
import type { Services } from "../../src/services.ts";
import type { Database } from "../../src/types.ts";
import { createTestServices, TEST_DATABASE_URL } from "../helpers/env.ts";

const PID = `SELECT pg_backend_pid() AS "PID"`;
const DIVIDE = `SELECT 10 / $1::int AS "Q"`;

if (TEST_DATABASE_URL)
  describe("refused statements keep their connection (postgres)", () => {
    let services: Services;
    let db: Database;
    let own: { close(): Promise<void> };
    const pid = async () => (await db.query<{ PID: number }>(PID)).rows[0]!.PID;

    beforeAll(async () => {
      // The same backend before and after a refusal: a session of its own, not through a PgBouncer.
      services = await createTestServices("postgres", { databaseDirect: true });
      if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      const handle = openPostgres(services.db.connectionString, { max: 1, statementTimeoutMs: 300 });
      db = own = handle;
    });
    afterAll(async () => {
      await own?.close();
      await services?.close();
    });

    it("a refused value, a refused key and a statement timeout: the next statement runs on the same backend", async () => {
      const first = await pid();
      await expect(db.query(`SELECT $1::int AS "N"`, ["not a number"])).rejects.toMatchObject({
        code: "22P02",
      });
      expect(await pid()).toBe(first);
      await expect(db.query(`SELECT pg_sleep(2)`)).rejects.toMatchObject({ code: "57014" });
      expect(await pid()).toBe(first);
      await db.query(`CREATE TEMP TABLE "KEPT" ("ID" int PRIMARY KEY)`);
      await db.query(`INSERT INTO "KEPT" VALUES (1)`);
      await expect(db.query(`INSERT INTO "KEPT" VALUES (1)`)).rejects.toMatchObject({ code: "23505" });
      // The temporary table is the session's own: still there, so the session is.
      expect((await db.query<{ N: number }>(`SELECT count(*)::int AS "N" FROM "KEPT"`)).rows).toEqual([
        { N: 1 },
      ]);
      expect(await pid()).toBe(first);
    });

    it("a named statement whose execution failed runs again on the same connection", async () => {
      const first = await pid();
      expect((await db.query(DIVIDE, [5], { prepare: "refusals" })).rows).toEqual([{ Q: 2 }]);
      await expect(db.query(DIVIDE, [0], { prepare: "refusals" })).rejects.toMatchObject({ code: "22012" });
      expect((await db.query(DIVIDE, [2], { prepare: "refusals" })).rows).toEqual([{ Q: 5 }]);
      // A named statement that fails to parse is not remembered as prepared: asked again, it is
      // parsed again (and refused again), and the connection goes on.
      const broken = `SELECT "NO_SUCH_COLUMN" + $1::int AS "X"`;
      for (let i = 0; i < 2; i++)
        await expect(db.query(broken, [1], { prepare: "refusals" })).rejects.toMatchObject({ code: "42703" });
      expect(await pid()).toBe(first);
    });

    it("a connection the server ended is still closed: the next statement gets a new backend", async () => {
      const first = await pid();
      await expect(db.query(`SELECT pg_terminate_backend(pg_backend_pid())`)).rejects.toBeTruthy();
      const next = await pid();
      expect(next).not.toBe(first);
    });
  });
