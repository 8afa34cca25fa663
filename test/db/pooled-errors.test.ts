// A statement sent on its own that the server refuses gives its connection back to the pool
// (src/db/database.ts, onPooledConnection): the next statement runs on the same backend, instead
// of the pool opening a new connection after every refused statement (pg-pool's own query() drops
// the connection after any failure). A connection that is lost is still dropped.
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseHandle, openPostgres } from "../../src/db/database.ts";
import type { Services } from "../../src/services.ts";
import { createTestServices, TEST_DATABASE_URL } from "../helpers/env.ts";

if (TEST_DATABASE_URL)
  describe("refused statements keep their connection (postgres)", () => {
    let services: Services;
    let one: DatabaseHandle;
    const backend = async () =>
      (await one.query<{ pid: number }>("SELECT pg_backend_pid() AS pid", [], { prepare: "pooled" })).rows[0]!
        .pid;

    beforeAll(async () => {
      services = await createTestServices("postgres");
      if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      one = openPostgres(services.db.connectionString, { max: 1, statementTimeoutMs: 300, watchdogMs: 0 });
    });
    afterAll(async () => {
      await one?.close();
      await services?.close();
    });

    it("a refused value and a statement timeout: the same backend answers the next statement", async () => {
      const pid = await backend();
      await expect(one.query(`SELECT 1 / ($1::int - $1::int) AS "X"`, [1])).rejects.toMatchObject({
        code: "22012",
      });
      expect(await backend()).toBe(pid);
      await expect(one.query("SELECT pg_sleep($1::float8)", [2])).rejects.toMatchObject({ code: "57014" });
      expect(await backend()).toBe(pid);
      if (one.kind !== "postgres") throw new Error("PostgreSQL expected");
      expect(one.pool.totalCount).toBe(1);
    });

    it("a connection the server ends is dropped; the next statement gets a new one", async () => {
      const pid = await backend();
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL! });
      await admin.connect();
      try {
        await admin.query("SELECT pg_terminate_backend($1)", [pid]);
      } finally {
        await admin.end();
      }
      // The pool finds out on the next statement (or before, if the connection's end arrives
      // while it is idle): either way a statement then runs on a new backend.
      let next: number | null = null;
      for (let i = 0; i < 3 && next === null; i++) next = await backend().catch(() => null);
      expect(next).not.toBeNull();
      expect(next).not.toBe(pid);
    });
  });
