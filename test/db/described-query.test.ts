// A prepared statement asks for its row description once per connection (src/db/pg-internals.ts):
// the second execution on a connection gets no RowDescription, and its rows are the same, typed by
// the same parsers. Errors leave the connection usable. The RowDescriptions are counted on
// PostgreSQL (PGlite has no wire); the rows and errors are checked on both.
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres } from "../../src/db/database.ts";
import type { Services } from "../../src/services.ts";
import type { Database } from "../../src/types.ts";
import { BACKENDS, createTestServices } from "../helpers/env.ts";

const SQL = `SELECT $1::int8 AS "BIG", $1::numeric / 4 AS "QUARTER", 'x' || $1 AS "TEXT",
                    NULL::text AS "NOTHING", '2026-11-26T10:00:00Z'::timestamptz AS "AT",
                    10 / $1::int AS "TENTH"`;

describe.each(BACKENDS)("prepared statements (%s)", (backend) => {
  let services: Services;
  let db: Database;
  /** PostgreSQL: the test's own pool of one connection (its RowDescriptions counted). */
  let own: { close(): Promise<void> } | null = null;
  /** RowDescription messages the server sent, on every connection of the pool (PostgreSQL). */
  let descriptions = 0;
  /** Expects `n` more RowDescriptions than `before` (PostgreSQL; PGlite has no wire to count). */
  const expectDescribed = (before: number, n: number) => {
    if (backend === "postgres") expect(descriptions - before).toBe(n);
  };

  beforeAll(async () => {
    // Named statements per connection: a session of its own, not through a PgBouncer.
    services = await createTestServices(backend, { databaseDirect: true });
    if (services.db.kind !== "postgres") {
      db = services.db;
      return;
    }
    const handle = openPostgres(services.db.connectionString, { max: 1 });
    if (handle.kind !== "postgres") throw new Error("PostgreSQL expected");
    handle.pool.on("connect", (client: pg.PoolClient) => {
      (client as unknown as { connection: NodeJS.EventEmitter }).connection.on("rowDescription", () => {
        descriptions++;
      });
    });
    db = own = handle;
  });
  afterAll(async () => {
    await own?.close();
    await services?.close();
  });

  it("describes a prepared statement's rows once per connection, and parses them the same", async () => {
    const before = descriptions;
    const first = await db.query(SQL, [5], { prepare: "described-once" });
    expectDescribed(before, 1);
    const second = await db.query(SQL, [6], { prepare: "described-once" });
    const third = await db.query(SQL, [7], { prepare: "described-once" });
    expectDescribed(before, 1);
    expect(first.rows).toEqual([
      { BIG: 5, QUARTER: 1.25, TEXT: "x5", NOTHING: null, AT: new Date("2026-11-26T10:00:00Z"), TENTH: 2 },
    ]);
    expect(second.rows).toEqual([
      { BIG: 6, QUARTER: 1.5, TEXT: "x6", NOTHING: null, AT: new Date("2026-11-26T10:00:00Z"), TENTH: 1 },
    ]);
    expect(third.rows[0]).toMatchObject({ BIG: 7, QUARTER: 1.75 });
    // Each row an object of its own (records are handed on as rows).
    expect(second.rows[0]).not.toBe(third.rows[0]);
    // In a transaction (a pool client), on the same connection: still described.
    const inTx = await db.transaction((tx) => tx.query(SQL, [8], { prepare: "described-once" }));
    expect(inTx.rows[0]).toMatchObject({ BIG: 8, TEXT: "x8" });
    expectDescribed(before, 1);
    // Statements that are not prepared are described every time (pg's own Query).
    const unprepared = await db.query(SQL, [9]);
    expect(unprepared.rows).toEqual([
      { BIG: 9, QUARTER: 2.25, TEXT: "x9", NOTHING: null, AT: new Date("2026-11-26T10:00:00Z"), TENTH: 1 },
    ]);
    await db.query(SQL, [9]);
    expectDescribed(before, 3);
  });

  it("an execution that fails, on the server or before it is sent, leaves the statement and the connection usable", async () => {
    await db.query(SQL, [2], { prepare: "described-failing" });
    await expect(db.query(SQL, [0], { prepare: "described-failing" })).rejects.toThrow(/division by zero/);
    // A value pg cannot turn into a parameter fails before the statement is sent (PGlite turns
    // it into text its own way, which the server then refuses).
    const unsendable = {
      toPostgres() {
        throw new Error("no text for this value");
      },
    };
    await expect(db.query(SQL, [unsendable], { prepare: "described-failing" })).rejects.toThrow(
      backend === "postgres" ? /no text for this value/ : /bigint/,
    );
    const after = await db.query(SQL, [10], { prepare: "described-failing" });
    expect(after.rows).toEqual([
      { BIG: 10, QUARTER: 2.5, TEXT: "x10", NOTHING: null, AT: new Date("2026-11-26T10:00:00Z"), TENTH: 1 },
    ]);
    const other = await db.query<{ n: number }>("SELECT 1 AS n");
    expect(other.rows).toEqual([{ n: 1 }]);
  });
});
