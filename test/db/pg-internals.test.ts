// The data layer's one reach into pg's private internals (src/db/pg-internals.ts,
// DescribedOnceQuery) holds only for the pg it was written against: pg is pinned exactly in
// package.json, and this test fails when an upgrade changes a private member the module uses, so
// that whoever upgrades pg reads the module again (or removes it) before anything else breaks.
// The public API the rest of the data layer relies on in an unusual way is checked too: a pool's
// connections made by the `Client` option, their socket by the `stream` option (src/db/connection.ts).
import { readFileSync } from "node:fs";
import { Socket } from "node:net";
import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { openPostgres } from "../../src/db/database.ts";
import { DescribedOnceQuery } from "../../src/db/pg-internals.ts";
import { TEST_DATABASE_URL } from "../helpers/env.ts";

const here = new URL("../../", import.meta.url);
const json = (path: string) => JSON.parse(readFileSync(new URL(path, here), "utf8"));

describe("pg's internals used by src/db/pg-internals.ts", () => {
  it("pg is pinned to the exact version installed (8.23.1, the one the module was written for)", () => {
    const wanted = json("package.json").dependencies.pg;
    expect(wanted).toMatch(/^\d+\.\d+\.\d+$/);
    expect(json("node_modules/pg/package.json").version).toBe(wanted);
    expect(wanted).toBe("8.23.1");
  });

  it("pg's Query has the members DescribedOnceQuery overrides and calls", () => {
    const proto = pg.Query.prototype as unknown as Record<string, unknown>;
    for (const method of ["prepare", "handleRowDescription", "handleError", "_getRows"])
      expect(typeof proto[method], method).toBe("function");
    const q = new DescribedOnceQuery({ text: "SELECT $1::int AS n", values: [1], types: pg.types });
    const inner = q as unknown as Record<string, unknown> & { _result: Record<string, unknown> };
    expect(inner._result).toBeInstanceOf(pg.Result);
    expect(inner._result._types).toBe(pg.types);
    for (const field of ["fields", "_parsers", "_prebuiltEmptyResultObject"])
      expect(Object.hasOwn(inner._result, field), field).toBe(true);
    // Set where the RowDescription is handled, read where each row is: DescribedOnceQuery sets it
    // itself when no RowDescription comes.
    const source = (name: string) => String(proto[name]);
    expect(source("handleRowDescription")).toContain("this._accumulateRows =");
    expect(source("handleDataRow")).toContain("this._accumulateRows");
    expect(source("handleRowDescription")).toContain("this._result.addFields(");
    expect(inner.portal).toBe("");
    expect(typeof (pg as unknown as { utils?: { prepareValue?: unknown } }).utils?.prepareValue).toBe(
      "function",
    );
  });

  it("pg's Connection has the members DescribedOnceQuery sends with", async () => {
    const { default: Connection } = (await import("pg/lib/connection.js" as string)) as {
      default: { prototype: Record<string, unknown> };
    };
    for (const method of ["bind", "close", "sync", "parse", "describe", "execute"])
      expect(typeof Connection.prototype[method], method).toBe("function");
    const client = new pg.Client();
    const connection = (client as unknown as { connection: Record<string, unknown> }).connection;
    expect(connection.parsedStatements).toEqual({});
  });
});

describe.runIf(TEST_DATABASE_URL)("the public API the pool's connections are made with (PostgreSQL)", () => {
  const db = openPostgres(TEST_DATABASE_URL ?? "postgres://unused", { max: 1, watchdogMs: 0 });
  afterAll(() => db.close());

  it("the pool makes its connections with the Client option, on the socket of the stream option", async () => {
    if (db.kind !== "postgres") throw new Error("PostgreSQL expected");
    const client = await db.pool.connect();
    try {
      const socket = (client as unknown as { socket: unknown }).socket;
      expect(socket).toBeInstanceOf(Socket);
      // What pg writes to (its own member, read here only to check the one we hold is it).
      expect((client as unknown as { connection: { stream: unknown } }).connection.stream).toBe(socket);
      expect((await client.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    } finally {
      client.release();
    }
  });
});
