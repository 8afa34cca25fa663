// The Database seam (src/db/database.ts) over PGlite and PostgreSQL: the same SQL gives the same
// values, transactions commit or roll back, NOTIFY reaches listeners, close() always finishes.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { type DatabaseHandle, openPglite, openPostgres } from "../../src/db/database.ts";
import { BACKENDS, createTestDatabase } from "../helpers/env.ts";

/** The data layer's own tests: its session mode on a session of its own, not through a PgBouncer. */
const SESSION = { direct: true };
import { faultyProxy, throughProxy } from "../helpers/proxy.ts";

async function until(ok: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error(`condition not met within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return Promise.race([
    p,
    new Promise<T>((_, reject) => setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms)),
  ]);
}

describe.each(BACKENDS)("DatabaseHandle on %s", (backend) => {
  let db: DatabaseHandle;
  beforeAll(async () => {
    db = await createTestDatabase(backend, SESSION);
    await db.exec(
      `CREATE TABLE "t" ("id" BIGSERIAL PRIMARY KEY, "n" NUMERIC(12, 2), "s" VARCHAR(10), "j" JSONB)`,
    );
  });
  afterAll(async () => {
    await db?.close();
  });

  it("BIGINT and NUMERIC come back as numbers; an int8 beyond 2^53 as a string", async () => {
    const res = await db.query<Record<string, unknown>>(
      `SELECT 42::bigint AS a, 12.5::numeric AS b, 9007199254740993::bigint AS c, '{"x":1}'::jsonb AS d,
              true AS e, NULL::bigint AS f, count(*) AS g FROM (VALUES (1), (2)) v(x)`,
    );
    expect(res.rows).toEqual([
      { a: 42, b: 12.5, c: "9007199254740993", d: { x: 1 }, e: true, f: null, g: 2 },
    ]);
  });

  it("parameters are values, never SQL", async () => {
    const res = await db.query<{ v: string }>(`SELECT $1::text AS v`, [`'; DROP TABLE "t"; --`]);
    expect(res.rows[0]!.v).toBe(`'; DROP TABLE "t"; --`);
    expect((await db.query(`SELECT 1 FROM "t" LIMIT 1`)).rowCount).toBe(0);
  });

  it("rowCount counts the rows a statement changed", async () => {
    const ins = await db.query(`INSERT INTO "t" ("n", "s") VALUES (1, 'a'), (2, 'b'), (3, 'c')`);
    expect(ins.rowCount).toBe(3);
    const upd = await db.query(`UPDATE "t" SET "s" = 'x' WHERE "n" >= 2`);
    expect(upd.rowCount).toBe(2);
    const none = await db.query(`UPDATE "t" SET "s" = 'y' WHERE false`);
    expect(none.rowCount).toBe(0);
  });

  it("a transaction commits when its function resolves and rolls back when it throws", async () => {
    const out = await db.transaction(async (tx) => {
      await tx.query(`INSERT INTO "t" ("s") VALUES ('commit')`);
      return "done";
    });
    expect(out).toBe("done");
    await expect(
      db.transaction(async (tx) => {
        await tx.query(`INSERT INTO "t" ("s") VALUES ('rollback')`);
        throw new Error("boom");
      }),
    ).rejects.toThrow("boom");
    const res = await db.query<{ s: string }>(`SELECT "s" FROM "t" WHERE "s" IN ('commit', 'rollback')`);
    expect(res.rows).toEqual([{ s: "commit" }]);
    // A failing statement inside also rolls back everything before it.
    await expect(
      db.transaction(async (tx) => {
        await tx.query(`INSERT INTO "t" ("s") VALUES ('partial')`);
        await tx.query(`INSERT INTO "t" ("s") VALUES ('far too long for ten')`);
      }),
    ).rejects.toThrow();
    expect((await db.query(`SELECT 1 FROM "t" WHERE "s" = 'partial'`)).rowCount).toBe(0);
  });

  it("NOTIFY reaches a listener on commit, not on rollback, and not after unlisten", async () => {
    const got: string[] = [];
    const unlisten = await db.listen("dimensio_test", (p) => got.push(p));
    await db
      .transaction(async (tx) => {
        await tx.query(`SELECT pg_notify('dimensio_test', 'rolled back')`);
        throw new Error("no");
      })
      .catch(() => {});
    await db.transaction(async (tx) => {
      await tx.query(`SELECT pg_notify('dimensio_test', 'one')`);
    });
    await until(() => got.includes("one"));
    expect(got).toEqual(["one"]);
    await unlisten();
    await db.query(`SELECT pg_notify('dimensio_test', 'two')`);
    await new Promise((r) => setTimeout(r, 100));
    expect(got).toEqual(["one"]);
  });

  it("close() finishes while a LISTEN subscription is open, and twice is harmless", async () => {
    const other = await createTestDatabase(backend, SESSION);
    await other.listen("dimensio_test", () => {});
    await within(other.close(), 5000, "close()");
    await within(other.close(), 5000, "a second close()");
    await expect(other.query("SELECT 1")).rejects.toThrow();
  });
});

// PostgreSQL only: a LISTEN connection that breaks is re-established.
describe.each(BACKENDS.filter((b) => b === "postgres"))("query timeout on %s", (backend) => {
  it("a statement over the pool's statement timeout is cancelled with SQLSTATE 57014", async () => {
    const db = await createTestDatabase(backend, SESSION);
    if (db.kind !== "postgres") throw new Error("expected PostgreSQL");
    const short = openPostgres(db.connectionString, { max: 1, statementTimeoutMs: 200 });
    try {
      await expect(short.query("SELECT pg_sleep(2)")).rejects.toMatchObject({ code: "57014" });
      expect((await short.query<{ n: number }>("SELECT 1 AS n")).rows).toEqual([{ n: 1 }]);
      const setting = await db.query<{ statement_timeout: string }>("SHOW statement_timeout");
      expect(setting.rows[0]!.statement_timeout).toBe("30s");
    } finally {
      await short.close();
      await db.close();
    }
  });
});

// PostgreSQL only: a transaction takes its connection from the pool with its first statement.
describe.each(BACKENDS.filter((b) => b === "postgres"))("connections of transactions on %s", (backend) => {
  it("a transaction that sends nothing takes no connection; one that does takes it at its first statement and sends in order", async () => {
    const db = await createTestDatabase(backend, SESSION);
    if (db.kind !== "postgres") throw new Error("expected PostgreSQL");
    const one = openPostgres(db.connectionString, { max: 1, watchdogMs: 0 });
    try {
      if (one.kind !== "postgres") throw new Error("expected PostgreSQL");
      await one.exec(`CREATE TABLE "lazy" ("n" INT)`);
      // The pool's only connection, held by a transaction that waits.
      let releaseHolder!: () => void;
      const held = new Promise<void>((resolve) => {
        releaseHolder = resolve;
      });
      let holding!: () => void;
      const holds = new Promise<void>((resolve) => {
        holding = resolve;
      });
      const holder = one.transaction(async (tx) => {
        await tx.query(`INSERT INTO "lazy" VALUES (1)`);
        holding();
        await held;
      });
      await holds;
      expect(one.pool.idleCount).toBe(0);
      // Nothing to send: it ends at once, without waiting for the connection (a create written
      // by its group's statement is such a transaction).
      expect(
        await within(
          one.transaction(async () => 42),
          1000,
          "a transaction that sends nothing",
        ),
      ).toBe(42);
      // Two statements given at once while the connection is taken elsewhere: once it is back,
      // BEGIN and they go out in order, and the transaction commits.
      const second = one.transaction(async (tx) => {
        const inserted = tx.query(`INSERT INTO "lazy" VALUES (2)`);
        const counted = tx.query<{ n: number }>(`SELECT count(*)::int AS n FROM "lazy"`);
        await inserted;
        return (await counted).rows[0]!.n;
      });
      releaseHolder();
      await holder;
      expect(await second).toBe(2);
      // A failing one rolls back what it sent.
      await expect(
        one.transaction(async (tx) => {
          await tx.query(`INSERT INTO "lazy" VALUES (3)`);
          throw new Error("changed its mind");
        }),
      ).rejects.toThrow("changed its mind");
      expect((await one.query<{ n: number }>(`SELECT count(*)::int AS n FROM "lazy"`)).rows).toEqual([
        { n: 2 },
      ]);
      expect(one.pool.idleCount).toBe(one.pool.totalCount);
    } finally {
      await one.close();
      await db.close();
    }
  });
});

describe.each(BACKENDS.filter((b) => b === "postgres"))("LISTEN resilience on %s", (backend) => {
  let db: DatabaseHandle;
  beforeAll(async () => {
    db = await createTestDatabase(backend, SESSION);
  });
  afterAll(async () => {
    await db?.close();
  });

  it("every channel on one listening connection; killed, it comes back and says so", async () => {
    if (db.kind !== "postgres") throw new Error("postgres only");
    const got: string[] = [];
    const other: string[] = [];
    const lost: string[] = [];
    const unlisten = await db.listen("dimensio_resilience", (p) => got.push(p), {
      onLost: () => lost.push("resilience"),
    });
    const unlistenOther = await db.listen("dimensio_other", (p) => other.push(p), {
      onLost: () => lost.push("other"),
    });
    const admin = openPostgres(db.connectionString, { max: 1 });
    try {
      // Two channels, one connection: exactly one backend listens, and it hears both.
      const listening = await admin.query<{ channels: number }>(
        `SELECT count(*)::int AS channels FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'dimensio listening'`,
      );
      expect(listening.rows).toEqual([{ channels: 1 }]);
      await admin.query(`SELECT pg_notify('dimensio_other', 'before')`);
      await until(() => other.includes("before"));
      const killed = await admin.query<{ ok: boolean }>(
        `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
          WHERE datname = current_database() AND application_name = 'dimensio listening'`,
      );
      expect(killed.rows).toEqual([{ ok: true }]);
      // Each listener is told at once, then hears "" once listening again (notifications may
      // have been missed) ...
      await until(() => got.includes("") && other.includes(""));
      expect(lost.sort()).toEqual(["other", "resilience"]);
      // ... and then the notifications again, on both channels.
      await admin.query(`SELECT pg_notify('dimensio_resilience', 'after')`);
      await admin.query(`SELECT pg_notify('dimensio_other', 'after')`);
      await until(() => got.includes("after") && other.includes("after"));
      // The last one gone, the connection goes back to the pool listening to nothing, unnamed.
      await unlisten();
      await unlistenOther();
      const left = await admin.query<{ application_name: string }>(
        `SELECT application_name FROM pg_stat_activity
          WHERE datname = current_database() AND pid <> pg_backend_pid() AND query = 'RESET application_name'`,
      );
      expect(left.rows).toEqual([{ application_name: "dimensio" }]);
    } finally {
      await admin.close();
    }
  });
});

// Two processes of one database, the second one's connections through a proxy that can hold them:
// listenersCaughtUp answers only once the second has told its listeners what was sent before.
describe.each(BACKENDS.filter((b) => b === "postgres"))("listenersCaughtUp on %s", (backend) => {
  let db: DatabaseHandle;
  let other: DatabaseHandle;
  let proxy: Awaited<ReturnType<typeof faultyProxy>>;
  beforeAll(async () => {
    db = await createTestDatabase(backend, SESSION);
    if (db.kind !== "postgres") throw new Error("postgres only");
    const url = new URL(db.connectionString);
    proxy = await faultyProxy(url.hostname, Number(url.port || 5432));
    other = openPostgres(throughProxy(db.connectionString, proxy), { max: 2, watchdogMs: 0 });
  });
  afterAll(async () => {
    await other?.close();
    await proxy?.close();
    await db?.close();
  });

  it("waits for every listening process to have been told what was committed before it", async () => {
    const heard: string[] = [];
    const unlisten = await other.listen("dimensio_caught_up_test", (p) => heard.push(p));
    try {
      // The other process is silent: a notice sent now reaches it only once the proxy lets go.
      proxy.stall();
      await db.query(`SELECT pg_notify('dimensio_caught_up_test', 'revoked')`);
      let caughtUp = false;
      const waiting = db.listenersCaughtUp(60_000).then(() => {
        caughtUp = true;
      });
      // Long enough for the probe's answer from this process's own listening connection.
      await new Promise((r) => setTimeout(r, 300));
      expect(caughtUp).toBe(false);
      expect(heard).toEqual([]);
      proxy.restore();
      await within(waiting, 5000, "the wait");
      // Told before it answered, so before the wait ended.
      expect(heard).toEqual(["revoked"]);
    } finally {
      proxy.restore();
      await unlisten();
    }
  });

  it("a process that does not answer is waited for no longer than the bound; a wait's end ends no other", async () => {
    const unlisten = await other.listen("dimensio_caught_up_test", () => {});
    try {
      proxy.stall();
      const started = Date.now();
      const longer = db.listenersCaughtUp(60_000);
      await within(db.listenersCaughtUp(300), 5000, "the bounded wait");
      expect(Date.now() - started).toBeGreaterThanOrEqual(290);
      // The longer wait still hears the answers once the other process does.
      proxy.restore();
      await within(longer, 5000, "the longer wait");
    } finally {
      proxy.restore();
      await unlisten();
    }
  });

  it("a connection slow to come counts against the bound", async () => {
    if (db.kind !== "postgres") throw new Error("postgres only");
    // A handle whose one connection is taken: its listening connection waits for the pool.
    const one = openPostgres(db.connectionString, { max: 1, connectTimeoutMs: 30_000, watchdogMs: 0 });
    if (one.kind !== "postgres") throw new Error("postgres only");
    const held = await one.pool.connect();
    try {
      // Bounded at 300 ms, where the pool would have it wait 30 s for a connection.
      const started = Date.now();
      await within(one.listenersCaughtUp(300), 20_000, "the bounded wait");
      expect(Date.now() - started).toBeLessThan(10_000);
    } finally {
      held.release();
      await one.close();
    }
  });

  it("with no other process listening, it answers once its own connection has", async () => {
    // other listens to nothing now: its connection is back in its pool, unnamed.
    const started = Date.now();
    await within(db.listenersCaughtUp(60_000), 20_000, "the wait");
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});

describe("the embedded database's data directory", () => {
  it("belongs to one handle at a time; a stale lock is taken over", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "dimensio-lock-"));
    const dataDir = path.join(dir, "pgdata");
    try {
      const first = await openPglite(dataDir);
      await first.query("CREATE TABLE kept (n int)");
      await first.query("INSERT INTO kept VALUES (7)");
      await expect(openPglite(dataDir)).rejects.toThrow(
        new RegExp(`in use by process ${process.pid} .*DATABASE_URL`),
      );
      await first.close();

      // A lock left by a process that is gone (here: a pid that cannot exist) does not block.
      await writeFile(`${dataDir}.lock`, "2147483646");
      const second = await openPglite(dataDir);
      expect((await second.query<{ n: number }>("SELECT n FROM kept")).rows).toEqual([{ n: 7 }]);
      await second.close();
      await expect(readFile(`${dataDir}.lock`, "utf8")).rejects.toMatchObject({ code: "ENOENT" });
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});

describe.each(BACKENDS.filter((b) => b === "postgres"))("wake-ups and writes on %s (issue 11)", (backend) => {
  let db: DatabaseHandle;
  let other: DatabaseHandle;
  beforeAll(async () => {
    db = await createTestDatabase(backend, SESSION);
    if (db.kind !== "postgres") throw new Error("PostgreSQL expected");
    other = openPostgres(db.connectionString, { max: 2 });
  });
  afterAll(async () => {
    await other?.close();
    await db?.close();
  });

  it("notifyAfterCommit: this process's listener at once, another's by NOTIFY, folded under load", async () => {
    const here: number[] = [];
    const there: number[] = [];
    const stopHere = await db.listen("wake_test", () => void here.push(performance.now()));
    const stopThere = await other.listen("wake_test", () => void there.push(performance.now()));
    // A rolled-back transaction wakes nobody.
    await expect(
      db.transaction(async (tx) => {
        tx.notifyAfterCommit?.("wake_test");
        throw new Error("rolled back");
      }),
    ).rejects.toThrow("rolled back");
    // One commit: the local listener is told before transaction() returns; the other by NOTIFY.
    await db.transaction(async (tx) => {
      expect(tx.notifyAfterCommit).toBeTypeOf("function");
      tx.notifyAfterCommit!("wake_test");
      await tx.query("SELECT 1");
    });
    expect(here.length).toBeGreaterThanOrEqual(1);
    await until(() => there.length === 1);
    // 200 commits at once: every one wakes the local listener, far fewer NOTIFYs reach the other
    // process, and one comes after the last transaction asked to commit (nothing is left
    // unsignalled: a NOTIFY goes with a commit, or after it for commits folded into a window).
    here.length = 0;
    there.length = 0;
    let lastAsked = 0;
    await Promise.all(
      Array.from({ length: 200 }, () =>
        db.transaction(async (tx) => {
          tx.notifyAfterCommit!("wake_test");
          await tx.query("SELECT 1");
          lastAsked = performance.now();
        }),
      ),
    );
    // (The local listener also hears the folded NOTIFYs on its own LISTEN connection.)
    expect(here.length).toBeGreaterThanOrEqual(200);
    await until(() => there.length > 0 && there.at(-1)! >= lastAsked);
    expect(there.length).toBeLessThan(100);
    await stopHere();
    await stopThere();
  });

  it("notifyAfterCommit's items: named in the payload (folded commits' together); too many, or none: empty", async () => {
    const here: string[] = [];
    const there: string[] = [];
    const stopHere = await db.listen("items_test", (p) => void here.push(p));
    const stopThere = await other.listen("items_test", (p) => void there.push(p));
    const named = (payloads: string[]) =>
      new Set(payloads.flatMap((p) => (p === "" ? ["*"] : p.split("\n"))));
    // This process is told at commit and again, later, by its own NOTIFY (which may so arrive
    // after a step below has begun): each step looks for what it caused, and for nothing else
    // it could have caused.
    await db.transaction(async (tx) => {
      tx.notifyAfterCommit!("items_test", "a");
      tx.notifyAfterCommit!("items_test", "b");
      tx.notifyAfterCommit!("items_test", "a");
      await tx.query("SELECT 1");
    });
    expect(here[0]).toBe("a\nb");
    expect(new Set(here)).toEqual(new Set(["a\nb"]));
    await until(() => there.length > 0);
    expect(new Set(there)).toEqual(new Set(["a\nb"]));
    // Commits folded into one NOTIFY: it names the items of every one.
    here.length = 0;
    there.length = 0;
    await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        db.transaction(async (tx) => {
          tx.notifyAfterCommit!("items_test", `item ${i}`);
          await tx.query("SELECT 1");
        }),
      ),
    );
    const all = Array.from({ length: 20 }, (_, i) => `item ${i}`);
    for (const item of all) expect(named(here).has(item)).toBe(true);
    await until(() => all.every((item) => named(there).has(item)));
    expect(there.length).toBeLessThan(20);
    expect(named(there).has("*")).toBe(false);
    // A transaction that names more than a payload holds, or one that names none: empty.
    for (const items of [Array.from({ length: 300 }, (_, i) => `a longer item ${i}`), [undefined]]) {
      here.length = 0;
      there.length = 0;
      await db.transaction(async (tx) => {
        for (const item of items) tx.notifyAfterCommit!("items_test", item);
        await tx.query("SELECT 1");
      });
      expect(here).toContain("");
      await until(() => there.includes(""));
      for (const told of [here, there])
        expect([...named(told)].filter((item) => item.startsWith("a longer item"))).toEqual([]);
    }
    await stopHere();
    await stopThere();
  });

  it("a local listener that throws does not fail the committed transaction", async () => {
    const stop = await db.listen("wake_throws", () => {
      throw new Error("listener broke");
    });
    const result = await db.transaction(async (tx) => {
      tx.notifyAfterCommit!("wake_throws");
      return (await tx.query<{ n: number }>("SELECT 7 AS n")).rows[0]!.n;
    });
    expect(result).toBe(7);
    await stop();
  });

  it("a transaction's statements queued in one turn leave in one write to the socket", async () => {
    if (db.kind !== "postgres") throw new Error("PostgreSQL expected");
    // A pool of one connection: the spied connection is the one the transaction gets.
    const one = openPostgres(db.connectionString, { max: 1 });
    try {
      if (one.kind !== "postgres") throw new Error("PostgreSQL expected");
      const client = await one.pool.connect();
      const stream = (client as unknown as { connection: { stream: import("node:stream").Writable } })
        .connection.stream;
      client.release();
      let writes = 0;
      const s = stream as unknown as Record<string, (...args: unknown[]) => unknown>;
      for (const method of ["_write", "_writev"]) {
        const original = s[method]!.bind(stream);
        s[method] = (...args: unknown[]) => {
          writes++;
          return original(...args);
        };
      }
      // BEGIN and two statements sent in one turn, the second deferred so that it travels with COMMIT.
      const rows = await one.transaction(async (tx) => {
        const first = tx.query<{ n: number }>("SELECT $1::int AS n", [1]);
        const second = tx.query<{ n: number }>("SELECT $1::int AS n", [2]);
        tx.defer?.(second);
        return [(await first).rows[0]!.n, (await second).rows[0]!.n];
      });
      expect(rows).toEqual([1, 2]);
      // BEGIN + both statements in one write; COMMIT (sent once they were answered) in another.
      expect(writes).toBe(2);
      // A lone statement outside a transaction is not held back.
      writes = 0;
      expect((await one.query<{ n: number }>("SELECT 3 AS n")).rows).toEqual([{ n: 3 }]);
      expect(writes).toBe(1);
    } finally {
      await one.close();
    }
  });
});
