// The service behind PgBouncer in transaction pooling mode (issue 36 §3, decisions.md §18):
// DATABASE_URL through a PgBouncer of the test's own (pool_size 5), DATABASE_POOL_MODE=transaction,
// DATABASE_LISTEN_URL direct to PostgreSQL. No session state is relied on across transactions:
// statements are unnamed (a name prepared on one server connection is unknown on the next), no
// startup settings (PgBouncer refuses them), LISTEN on its own direct connection.
// vitest.config.ts includes this directory only where the pgbouncer binary is found (README).
import { randomBytes } from "node:crypto";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { createClient, type ExecutionResult } from "graphql-ws";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { buildApp } from "../../src/app.ts";
import { loadConfig } from "../../src/config.ts";
import { type DatabaseHandle, openPostgres } from "../../src/db/database.ts";
import type { ReceivedEvent } from "../../src/events/bus.ts";
import { createRelay, type Relay } from "../../src/events/relay.ts";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { importFixture, readFixtureFile } from "../../src/fixtures/import.ts";
import { createLogger } from "../../src/logger.ts";
import { openServices, type Services } from "../../src/services.ts";
import { bearer, loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { SAMPLE_FIXTURE, TEST_DATABASE_URL, TEST_JWT_SECRET } from "../helpers/env.ts";
import { type PgBouncer, startPgBouncer } from "../helpers/pgbouncer.ts";
import { eventually } from "../events/support.ts";
import WebSocket from "ws";

if (!TEST_DATABASE_URL)
  throw new Error(
    "test/pgbouncer needs a PostgreSQL: TEST_DATABASE_URL, or the run's own (unset TEST_EMBEDDED_POSTGRES=off)",
  );
const SERVER = TEST_DATABASE_URL;

function withDatabase(url: string, name: string): string {
  const u = new URL(url);
  u.pathname = `/${name}`;
  return u.toString();
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: SERVER });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** Resolves with the first value `take` gives (not undefined), or rejects after `ms`. */
function waitFor<T>(what: string, ms: number, register: (give: (v: T) => void) => void): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms);
    register((v) => {
      clearTimeout(timer);
      resolve(v);
    });
  });
}

describe("the service behind PgBouncer in transaction pooling mode", () => {
  let bouncer: PgBouncer;
  let name: string;
  let direct: string;
  let through: string;
  let services: Services;
  let app: FastifyInstance;
  let headers: { authorization: string };
  /** Another process's handle on the same database, as the service opens it (its own LISTEN). */
  let other: DatabaseHandle | null = null;
  let relay: Relay | null = null;

  beforeAll(async () => {
    bouncer = await startPgBouncer(SERVER, { poolSize: 5 });
    name = `dimensio_pgb_${process.pid}_${randomBytes(4).toString("hex")}`;
    await admin((c) => c.query(`CREATE DATABASE "${name}"`));
    direct = withDatabase(SERVER, name);
    through = bouncer.urlFor(direct);
    const config = loadConfig({
      ...UNLIMITED_ENV,
      LOG_LEVEL: "silent",
      JWT_SECRET: TEST_JWT_SECRET,
      DEMO_DATA: "false",
      DATABASE_URL: through,
      DATABASE_POOL_MODE: "transaction",
      DATABASE_LISTEN_URL: direct,
    });
    services = await openServices(config, { logger: createLogger("silent") });
    await importFixture(services, await readFixtureFile(SAMPLE_FIXTURE));
    app = await buildApp(services);
    await app.ready();
    headers = bearer(await loginAs(app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password));
  });

  afterAll(async () => {
    await relay?.stop();
    await other?.close();
    await app?.close();
    await services?.close();
    await bouncer?.stop();
    if (name) await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
  });

  const rest = async (method: "GET" | "POST", url: string, payload?: unknown) => {
    const res = await app.inject({
      method,
      url,
      headers,
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });
    return { status: res.statusCode, body: res.json() };
  };
  const graphql = async (query: string) => {
    const res = await app.inject({ method: "POST", url: "/graphql", headers, payload: { query } });
    return { status: res.statusCode, body: res.json() };
  };

  it("the service's pool goes through PgBouncer, its listening connection direct", async () => {
    if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
    expect(services.db.connectionString).toBe(through);
    // Listening now (the session cache, the registry): the one backend named so is a direct
    // connection of this database, with its LISTENs.
    const { rows } = await admin((c) =>
      c.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = 'dimensio listening'`,
        [name],
      ),
    );
    expect(rows).toEqual([{ n: 1 }]);
  });

  it("REST and GraphQL reads and writes", async () => {
    const created = await rest("POST", "/api/v4/core/CUST?source=anag-1", {
      data: { NAME: "Through PgBouncer" },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.CUST_ID as number;
    const read = await rest("GET", `/api/v4/core/CUST/${id}?source=anag-1`);
    expect([read.status, read.body.data.NAME]).toEqual([200, "Through PgBouncer"]);
    const mutation = await graphql(
      `mutation { CUST_create(source: "anag-1", data: {NAME: "GraphQL through PgBouncer"}) { data { CUST_ID NAME } } }`,
    );
    expect(mutation.status).toBe(200);
    expect(mutation.body.errors).toBeUndefined();
    expect(mutation.body.data.CUST_create.data.NAME).toBe("GraphQL through PgBouncer");
    const query = await graphql(`{ CUST(source: "anag-1", limit: 500) { data { CUST_ID NAME } } }`);
    expect(query.status).toBe(200);
    const names = (query.body.data.CUST.data as Array<{ NAME: string }>).map((c) => c.NAME);
    expect(names).toEqual(expect.arrayContaining(["Through PgBouncer", "GraphQL through PgBouncer"]));
  });

  it("transactions of several prepared statements, more at once than PgBouncer has server connections", async () => {
    const db = services.db;
    await db.exec(`CREATE TABLE "PGB_T" ("N" int NOT NULL, "K" text NOT NULL)`);
    // Named statements would be prepared on one server connection and asked for on another.
    const insert = `INSERT INTO "PGB_T" ("N", "K") VALUES ($1, $2)`;
    const count = `SELECT count(*)::int AS "C" FROM "PGB_T" WHERE "K" = $1`;
    const runs = Array.from({ length: 24 }, (_, i) =>
      db.transaction(async (tx) => {
        const key = `k${i}`;
        for (let n = 0; n < 3; n++) await tx.query(insert, [n, key], { prepare: "pgb" });
        const seen = (await tx.query<{ C: number }>(count, [key], { prepare: "pgb" })).rows[0]!.C;
        if (i % 4 === 3) throw new Error(`rolled back ${key}`);
        return seen;
      }),
    );
    const outcomes = await Promise.allSettled(runs);
    for (const [i, outcome] of outcomes.entries()) {
      if (i % 4 === 3)
        expect(outcome).toMatchObject({ status: "rejected", reason: { message: `rolled back k${i}` } });
      else expect(outcome).toEqual({ status: "fulfilled", value: 3 });
    }
    const { rows } = await db.query<{ K: string; C: number }>(
      `SELECT "K", count(*)::int AS "C" FROM "PGB_T" GROUP BY "K" ORDER BY "K"`,
    );
    expect(rows.length).toBe(18);
    expect(rows.every((r) => r.C === 3 && Number(r.K.slice(1)) % 4 !== 3)).toBe(true);
  });

  it("concurrent requests from more clients than PgBouncer's server pool: all answered", async () => {
    const requests = Array.from({ length: 40 }, (_, i) =>
      i % 4 === 0
        ? rest("POST", "/api/v4/core/CUST?source=anag-1", { data: { NAME: `Concurrent ${i}` } })
        : i % 4 === 1
          ? graphql(`{ CUST(source: "anag-1", limit: 5) { data { CUST_ID } } }`)
          : rest("GET", "/api/v4/core/CITY?source=anag-3"),
    );
    const statuses = (await Promise.all(requests)).map((r) => r.status);
    expect(statuses.filter((s, i) => s !== (i % 4 === 0 ? 201 : 200))).toEqual([]);
  });

  it("another process's relay is woken through its direct LISTEN and publishes a create once committed", async () => {
    other = openPostgres(through, { poolMode: "transaction", listenUrl: direct, max: 3 });
    const events: ReceivedEvent[] = [];
    let onEvent: (e: ReceivedEvent) => void = () => {};
    const unsubscribe = await services.bus.subscribe("pgbouncer-test", async (e) => {
      events.push(e);
      onEvent(e);
    });
    try {
      // No poll within the test's time: only a NOTIFY wakes it.
      relay = createRelay({
        db: other,
        bus: services.bus,
        logger: createLogger("silent"),
        batchSize: 100,
        pollMs: 600_000,
        retentionMs: 0,
      });
      await relay.start();
      await relay.drain();
      const created = await rest("POST", "/api/v4/core/CUST?source=anag-1", {
        data: { NAME: "Woken relay" },
      });
      expect(created.status).toBe(201);
      const id = String(created.body.data.CUST_ID);
      const event = await waitFor<ReceivedEvent>("the Created event", 15_000, (give) => {
        const isIt = (e: ReceivedEvent) =>
          e.dimension === "CUST" && JSON.parse(e.body.toString()).AGGREGATE_ID === id;
        onEvent = (e) => {
          if (isIt(e)) give(e);
        };
        const already = events.find(isIt);
        if (already) give(already);
      });
      expect(event).toMatchObject({ dimension: "CUST", type: "CUSTCreated" });
    } finally {
      await unsubscribe();
    }
  });

  it("a notification after commit reaches another process's listener (its direct connection)", async () => {
    const listener = other ?? openPostgres(through, { poolMode: "transaction", listenUrl: direct, max: 3 });
    other = listener;
    let give: (payload: string) => void = () => {};
    const unlisten = await listener.listen("pgb_channel", (payload) => give(payload));
    try {
      const heard = waitFor<string>("the notification", 10_000, (g) => {
        give = (payload) => payload !== "" && g(payload);
      });
      await services.db.transaction(async (tx) => {
        await tx.query(`INSERT INTO "PGB_T" ("N", "K") VALUES (1, 'notified')`);
        tx.notifyAfterCommit?.("pgb_channel", "item-42");
      });
      expect(await heard).toBe("item-42");
      // Every listening connection of the database (both direct) answers the caught-up probe.
      await services.db.listenersCaughtUp(5000);
    } finally {
      await unlisten();
    }
  });

  it("a GraphQL subscription over WebSocket gets the events of creates (the service's own relay)", async () => {
    let runtime: EventRuntime | null = null;
    const results: ExecutionResult[] = [];
    const socket = await (async () => {
      await app.listen({ host: "127.0.0.1", port: 0 });
      const port = (app.server.address() as AddressInfo).port;
      return createClient({
        url: `ws://127.0.0.1:${port}/graphql`,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        connectionParams: { authorization: headers.authorization },
      });
    })();
    try {
      await relay?.stop();
      relay = null;
      runtime = await startEventRuntime(services, { relay: true });
      let failed: unknown = null;
      const dispose = socket.subscribe(
        { query: `subscription { CUST_events(source: "anag-1") { event_type record_id } }` },
        {
          next: (r) => results.push(r as ExecutionResult),
          error: (e) => {
            failed = e;
          },
          complete: () => {},
        },
      );
      // Live once an event arrives: creates until one does.
      let n = 0;
      await eventually(
        async () => {
          if (failed) throw failed;
          if (results.length > 0) return true;
          const res = await rest("POST", "/api/v4/core/CUST?source=anag-1", {
            data: { NAME: `Subscribed ${++n}` },
          });
          expect(res.status).toBe(201);
          return false;
        },
        { what: "the subscription's first event" },
      );
      dispose();
      expect(results[0]!.errors).toBeUndefined();
      expect(results[0]!.data).toEqual({
        CUST_events: { event_type: "CUSTCreated", record_id: expect.stringMatching(/^\d+$/) },
      });
    } finally {
      await socket.dispose();
      await runtime?.stop();
    }
  });
});

describe("what the mode changes behind PgBouncer's transaction pooling", () => {
  let bouncer: PgBouncer;
  beforeAll(async () => {
    // One server connection: every client's statements meet the same backend's session.
    bouncer = await startPgBouncer(SERVER, { poolSize: 1 });
  });
  afterAll(async () => bouncer?.stop());

  it("session mode's startup settings are refused by PgBouncer; transaction mode sends none", async () => {
    const session = openPostgres(bouncer.urlFor(SERVER), { poolMode: "session", watchdogMs: 0, max: 1 });
    try {
      await expect(session.query("SELECT 1 AS one")).rejects.toThrow(/unsupported startup parameter/);
    } finally {
      await session.close();
    }
    const transaction = openPostgres(bouncer.urlFor(SERVER), {
      poolMode: "transaction",
      watchdogMs: 0,
      max: 2,
    });
    try {
      expect((await transaction.query("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
    } finally {
      await transaction.close();
    }
  });

  it("named statements of two clients meet on one server connection (what unnamed ones avoid)", async () => {
    const clients = [0, 1].map(() => new pg.Client({ connectionString: bouncer.urlFor(SERVER) }));
    await Promise.all(clients.map((c) => c.connect()));
    try {
      // Each client prepares "its" statement d1; PgBouncer gave both the same backend.
      expect((await clients[0]!.query({ name: "d1", text: "SELECT 1 AS n" })).rows).toEqual([{ n: 1 }]);
      await expect(clients[1]!.query({ name: "d1", text: "SELECT 2 AS n" })).rejects.toMatchObject({
        code: "42P05",
      });
      // The handle in transaction mode: the same statement prepared by name in session mode, here
      // unnamed, from two connections of its pool at once.
      const db = openPostgres(bouncer.urlFor(SERVER), { poolMode: "transaction", watchdogMs: 0, max: 2 });
      try {
        const both = await Promise.all(
          [1, 2, 3, 4].map((n) => db.query<{ n: number }>("SELECT $1::int AS n", [n], { prepare: "mode" })),
        );
        expect(both.map((r) => r.rows[0]!.n)).toEqual([1, 2, 3, 4]);
      } finally {
        await db.close();
      }
    } finally {
      await Promise.all(clients.map((c) => c.end()));
    }
  });
});
