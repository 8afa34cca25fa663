// The embedded database runs each statement synchronously on the service's thread and answers
// through promises: without a yield, a chain of statements (ten aliased pages of one GraphQL
// operation) is one unbroken run of microtasks, and no other request's socket is read until it
// ends (issue 18 §3, bench/isolation: tenant B's GET waited for tenant A's whole operation). Each
// statement outside a transaction first gives the event loop a turn.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseHandle, openPglite } from "../../src/db/database.ts";

describe("the embedded database lets the event loop turn between statements", () => {
  let db: DatabaseHandle;
  beforeAll(async () => {
    db = await openPglite(null);
  });
  afterAll(async () => {
    await db.close();
  });

  it("runs I/O and immediate callbacks between one chain's statements", async () => {
    const events: string[] = [];
    setImmediate(() => events.push("other work"));
    for (let i = 0; i < 5; i++) {
      await db.query("SELECT $1::int AS n", [i]);
      events.push(`statement ${i}`);
    }
    expect(events.indexOf("other work")).toBeGreaterThanOrEqual(0);
    expect(events.indexOf("other work")).toBeLessThan(events.indexOf("statement 1"));
  });

  it("keeps a transaction's statements together (the database is held anyway)", async () => {
    const events: string[] = [];
    const result = await db.transaction(async (tx) => {
      setImmediate(() => events.push("other work"));
      for (let i = 0; i < 3; i++) {
        await tx.query("SELECT $1::int AS n", [i]);
        events.push(`statement ${i}`);
      }
      return events.length;
    });
    expect(result).toBe(3);
    expect(events.slice(0, 3)).toEqual(["statement 0", "statement 1", "statement 2"]);
  });
});
