// The read gate (src/ratelimit/tenant-gate.ts, issue 35 §4) over a database whose statements end
// when the test says: a tenant's statements run `perTenant` at a time; with `total` (the embedded
// database) every tenant's statements together run `total` at a time, and a turn that ends goes to
// another waiting tenant before the tenant that had it, even when that tenant queued first.
import { describe, expect, it } from "vitest";
import { createTenantGate, gateBounds } from "../../src/ratelimit/tenant-gate.ts";
import type { Queryable } from "../../src/types.ts";

/** A database whose statements run until `end(text)`; `started` lists them in the order they reached it. */
function heldDatabase() {
  const started: string[] = [];
  const ends = new Map<string, () => void>();
  const db: Queryable = {
    query: (text) =>
      new Promise((resolve) => {
        started.push(text);
        ends.set(text, () => resolve({ rows: [], rowCount: 0 } as never));
      }),
  };
  return {
    db,
    started,
    /** Statements at the database now. */
    running: () => [...ends.keys()],
    end(text: string) {
      const end = ends.get(text);
      if (!end) throw new Error(`${text} is not at the database`);
      ends.delete(text);
      end();
    },
  };
}

/** Lets the event loop go round (the gate hands a turn over on the next one). */
const loopTurns = async (n = 3) => {
  for (let i = 0; i < n; i++) await new Promise((resolve) => setImmediate(resolve));
};

describe("the tenant read gate", () => {
  it("runs a tenant's statements perTenant at a time; another tenant's go straight through", async () => {
    const database = heldDatabase();
    const gate = createTenantGate({ perTenant: 2 });
    const acme = gate.queryable(database.db, "acme");
    const globex = gate.queryable(database.db, "globex");
    const a = ["a1", "a2", "a3"].map((text) => acme.query(text));
    await loopTurns();
    expect(database.running()).toEqual(["a1", "a2"]);
    expect(gate.state("acme")).toEqual({ running: 2, waiting: 1 });

    const b = globex.query("b1");
    await loopTurns();
    expect(database.running()).toEqual(["a1", "a2", "b1"]);
    database.end("b1");
    await b;

    database.end("a1");
    await loopTurns();
    expect(database.running()).toEqual(["a2", "a3"]);
    database.end("a2");
    database.end("a3");
    await Promise.all(a);
    expect(gate.state("acme")).toEqual({ running: 0, waiting: 0 });
  });

  it("with total, takes turns between tenants: a turn that ends goes to the tenant that did not have it", async () => {
    const database = heldDatabase();
    const gate = createTenantGate({ perTenant: 2, total: 1 });
    const acme = gate.queryable(database.db, "acme");
    const globex = gate.queryable(database.db, "globex");
    const a = ["a1", "a2", "a3"].map((text) => acme.query(text));
    await loopTurns();
    const b = globex.query("b1");
    await loopTurns();
    // One at the database; acme's second waits for a turn, its third for a place in its lane.
    expect(database.running()).toEqual(["a1"]);
    expect(gate.state("acme")).toEqual({ running: 2, waiting: 1 });
    expect(gate.state("globex")).toEqual({ running: 1, waiting: 0 });

    // acme's a2 waited for a turn before b1 did, but acme had the turn that ended: b1 goes next.
    database.end("a1");
    await loopTurns();
    expect(database.running()).toEqual(["b1"]);
    database.end("b1");
    await b;
    await loopTurns();
    expect(database.running()).toEqual(["a2"]);
    database.end("a2");
    await loopTurns();
    database.end("a3");
    await Promise.all(a);
    expect(database.started).toEqual(["a1", "b1", "a2", "a3"]);
  });

  it("hands a turn over on the event loop's next turn, so a request read meanwhile gets it", async () => {
    const database = heldDatabase();
    const gate = createTenantGate({ perTenant: 1, total: 1 });
    const acme = gate.queryable(database.db, "acme");
    const globex = gate.queryable(database.db, "globex");
    // acme's second statement follows its first at once (as a request's next step does).
    const a = acme.query("a1").then(() => acme.query("a2"));
    await loopTurns();
    database.end("a1");
    // Another tenant's statement arrives before the event loop goes round (its request read from
    // its socket meanwhile): the turn is its, although acme's a2 was there first.
    for (let i = 0; i < 10; i++) await Promise.resolve(); // microtasks only: no turn of the loop
    expect(gate.state("acme")).toEqual({ running: 1, waiting: 0 }); // a2, waiting for a turn
    const b = globex.query("b1");
    await loopTurns();
    expect(database.running()).toEqual(["b1"]);
    database.end("b1");
    await b;
    await loopTurns();
    database.end("a2");
    await a;
    expect(database.started).toEqual(["a1", "b1", "a2"]);
  });

  it("bounds: 1 a tenant and 1 in all on the embedded database, 4 a tenant on PostgreSQL, or as configured", () => {
    expect(gateBounds("pglite", 0)).toEqual({ perTenant: 1, total: 1 });
    expect(gateBounds("postgres", 0)).toEqual({ perTenant: 4 });
    expect(gateBounds("pglite", 3)).toEqual({ perTenant: 3, total: 3 });
    expect(gateBounds("postgres", 2)).toEqual({ perTenant: 2 });
  });
});
