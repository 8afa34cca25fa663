// Issue 18 §1, the database: the PostgreSQL connection cut under load (through a TCP proxy the
// test starts) answers 503 DATABASE_UNAVAILABLE in the standard body with Retry-After, within a
// few seconds, never a 500 and never a crash (a server gone silent too: the watchdog answers 503
// within seconds while a long query on a healthy server still runs); /readyz says not ready, /healthz and /metrics say the
// database is down. Once the database is back, without a restart: writes succeed, the relay
// publishes again, the listening connection is re-established (NOTIFY-driven metadata reloads
// work, and a change missed while it was down is picked up), also for `npm start` as a child
// process. /readyz depends on neither the broker nor object storage, whose states /healthz and
// dimensio_dependency_up show. On the real PostgreSQL and RabbitMQ (s3rver for S3); the embedded
// default's health is covered by test/foundation/http.test.ts.
import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import S3rver from "s3rver";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseHandle, openPostgres } from "../../src/db/database.ts";
import { createReadinessCheck } from "../../src/db/readiness.ts";
import type { OutboxMessage } from "../../src/events/bus.ts";
import { type EventRuntime, eventPartsOf, startEventRuntime } from "../../src/events/runtime.ts";
import { mapError } from "../../src/http/error-handler.ts";
import { createDependencyHealth, databaseProbe } from "../../src/observability/dependencies.ts";
import { createMetrics } from "../../src/observability/metrics.ts";
import { bumpMetadataVersion, upsertMetadataRows } from "../../src/metadata/store.ts";
import { eventually, tcpProxy } from "../events/support.ts";
import { bearer, loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { createTestApp, TEST_AMQP_URL, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";
import { freePort, spawnStart, waitReady } from "../helpers/process.ts";
import { faultyProxy, throughProxy } from "../helpers/proxy.ts";

type Proxy = Awaited<ReturnType<typeof tcpProxy>>;

interface Answer {
  status: number;
  headers: Record<string, unknown>;
  // biome-ignore lint/suspicious/noExplicitAny: bodies are inspected freely
  body: any;
  ms: number;
}

/** A proxy to the server of a URL (PostgreSQL's or RabbitMQ's). */
function proxyTo(url: string, defaultPort: number): Promise<Proxy> {
  const u = new URL(url);
  return tcpProxy(u.hostname, Number(u.port || defaultPort));
}

/** The same database as `db` (which goes through the proxy), reached directly. */
function directTo(db: DatabaseHandle): DatabaseHandle {
  if (db.kind !== "postgres") throw new Error("PostgreSQL only");
  const direct = new URL(TEST_DATABASE_URL!);
  direct.pathname = new URL(db.connectionString).pathname;
  return openPostgres(direct.toString(), { max: 2 });
}

/** A dimension row set as a metadata write stores it (test/foundation/registry.test.ts). */
async function writeDimension(db: DatabaseHandle, code: string, description: string): Promise<void> {
  await db.transaction(async (tx) => {
    await upsertMetadataRows(tx, {
      TB_DIM: [{ COD_DIM: code, DESC_DIM: description, TABLE_NAME: `TB_${code}`, ID_FIELD: `${code}_ID` }],
      TB_VAR: [{ COD_DIM: code, NUM_VAR: 1, COD_VAR: `${code}_ID`, DATA_TYPE: "INTEGER" }],
    });
    await bumpMetadataVersion(tx);
  });
}

/** The value of dimensio_dependency_up for one dependency, or null without a sample. */
function dependencyUp(metrics: string, dependency: string): number | null {
  const line = metrics
    .split("\n")
    .find((l) => l.startsWith("dimensio_dependency_up{") && l.includes(`dependency="${dependency}"`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : null;
}

/** A server that accepts connections and never answers (a database host that hangs). */
async function silentServer() {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((s) => {
    sockets.add(s);
    s.on("error", () => {});
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

const DATABASE_UNAVAILABLE = {
  error: "ServiceUnavailable",
  message: "The database is not reachable right now; retry shortly.",
  code: "DATABASE_UNAVAILABLE",
  status: 503,
};

describe("bounds: a database that never answers", () => {
  it("a statement, a transaction, the readiness probe, /healthz and a scrape answer within their bounds (503s)", async () => {
    const hole = await silentServer();
    const db = openPostgres(`postgres://postgres@127.0.0.1:${hole.port}/nowhere`, { connectTimeoutMs: 500 });
    // One that would wait its 5 s for a connection.
    const slow = openPostgres(`postgres://postgres@127.0.0.1:${hole.port}/nowhere`);
    try {
      for (const work of [() => db.query("SELECT 1"), () => db.transaction((tx) => tx.query("SELECT 1"))]) {
        const started = performance.now();
        const err = await work().then(
          () => null,
          (e: unknown) => e,
        );
        expect(performance.now() - started).toBeLessThan(2000);
        expect(mapError(err)).toEqual({
          status: 503,
          body: DATABASE_UNAVAILABLE,
          headers: { "Retry-After": "1" },
        });
      }
      const started = performance.now();
      const readiness = createReadinessCheck(db, undefined, 200);
      const checks = await readiness();
      expect(performance.now() - started).toBeLessThan(1500);
      expect(checks.database).toMatch(/^unreachable/);
      // /healthz's view answers at once: the last state known while a check still runs.
      const health = createDependencyHealth({ database: databaseProbe(readiness, 50) });
      const first = performance.now();
      expect(await health.states()).toEqual({ database: "unknown" });
      expect(performance.now() - first).toBeLessThan(500);
      await eventually(async () => (await health.states()).database === "down", { what: "down" });
      // A scrape of /metrics is not held by the outbox count (1 s at most).
      const scrapeStarted = performance.now();
      const text = await createMetrics({ db: slow, role: "all" }).registry.metrics();
      expect(performance.now() - scrapeStarted).toBeLessThan(3000);
      expect(text).toContain("dimensio_outbox_backlog");
    } finally {
      await db.close();
      await hole.close();
      await slow.close();
    }
  });
});

if (TEST_DATABASE_URL)
  describe("a transaction holding its connection when the connection is cut", () => {
    let proxy: Proxy;
    let db: DatabaseHandle;
    const lost: string[] = [];
    beforeAll(async () => {
      proxy = await proxyTo(TEST_DATABASE_URL!, 5432);
      db = openPostgres(throughProxy(TEST_DATABASE_URL!, proxy), {
        max: 2,
        onConnectionError: (_err, which) => lost.push(which),
      });
    });
    afterAll(async () => {
      await db?.close();
      await proxy?.close();
    });

    it("its next statement fails as a 503 (no unhandled 'error' event); the pool then serves again", async () => {
      let entered!: () => void;
      const inside = new Promise<void>((r) => {
        entered = r;
      });
      let release!: () => void;
      const held = new Promise<void>((r) => {
        release = r;
      });
      const tx = db.transaction(async (q) => {
        await q.query("SELECT 1");
        entered();
        await held;
        return q.query("SELECT 2");
      });
      tx.catch(() => {});
      await inside;
      proxy.cut();
      // The break reaches the checked-out connection between two of its statements.
      await eventually(() => lost.includes("transaction"), { what: "the connection's error" });
      release();
      const err = await tx.then(
        () => null,
        (e: unknown) => e,
      );
      expect(mapError(err).status).toBe(503);
      expect(mapError(err).body).toEqual(DATABASE_UNAVAILABLE);
      proxy.restore();
      // The broken connection was not given back to the pool for reuse.
      expect((await db.transaction((q) => q.query<{ n: number }>("SELECT 2 AS n"))).rows).toEqual([{ n: 2 }]);
    });
  });

type ThroughFaultyProxy = { proxy: Awaited<ReturnType<typeof faultyProxy>>; t: TestApp; token: string };

/**
 * For the describe it is called in: the sample app whose primary (or read replica) connections
 * go through a faulty proxy, and anna's token, handed to `use` before the tests; the proxy
 * restored, the app and the proxy closed after them.
 */
function appThroughFaultyProxy(
  through: "databaseThrough" | "replicaThrough",
  use: (made: ThroughFaultyProxy) => void,
): void {
  let made: Partial<ThroughFaultyProxy> = {};
  beforeAll(async () => {
    const server = new URL(TEST_DATABASE_URL!);
    made.proxy = await faultyProxy(server.hostname, Number(server.port || 5432));
    made.t = await createTestApp("postgres", {
      fixture: "sample",
      [through]: made.proxy.port,
      env: { ...UNLIMITED_ENV, SESSION_CACHE_MS: "0" },
    });
    made.token = await loginAs(made.t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    use(made as ThroughFaultyProxy);
  });
  afterAll(async () => {
    made.proxy?.restore();
    await made.t?.close();
    await made.proxy?.close();
    made = {};
  });
}

if (TEST_DATABASE_URL)
  describe("a database that goes silent on its open connections (the watchdog)", () => {
    let proxy: Awaited<ReturnType<typeof faultyProxy>>;
    let t: TestApp;
    let token: string;
    // The default watchdog bound (2 s): a statement unanswered that long makes it probe.
    appThroughFaultyProxy("databaseThrough", (made) => {
      ({ proxy, t, token } = made);
    });

    const get = async (url: string) => {
      const started = performance.now();
      const res = await t.app.inject({ method: "GET", url, headers: bearer(token) });
      return {
        status: res.statusCode,
        body: res.json(),
        headers: res.headers,
        ms: performance.now() - started,
      };
    };
    const read = () => get("/api/v4/core/CITY?source=anag-3");
    // Prisma (webhook registrations) has a pool of its own, under the same watchdog: asked
    // directly, since a request would meet the silence first in its session read.
    const viaPrisma = async () => {
      const started = performance.now();
      const outcome = await t.services.prisma.$queryRaw`SELECT 1 AS one`.then(
        () => ({ status: 200, body: null, headers: {} as Record<string, unknown> }),
        (err: unknown) => mapError(err),
      );
      return { ...outcome, headers: outcome.headers ?? {}, ms: performance.now() - started };
    };
    const probe = (url: string) => t.app.inject({ method: "GET", url });

    it("a long query on a healthy server goes on past the bound (the probe answered)", async () => {
      const before = proxy.connections();
      const res = await t.services.db.query<{ slept: string }>("SELECT pg_sleep(4)::text AS slept");
      expect(res.rows).toEqual([{ slept: "" }]);
      // The watchdog did ask: a connection of its own went through the proxy meanwhile.
      expect(proxy.connections()).toBeGreaterThan(before);
      expect((await read()).status).toBe(200);
    });

    it("silent: 503 DATABASE_UNAVAILABLE within seconds (not the statement timeout), not ready; back once it answers", async () => {
      expect((await read()).status).toBe(200);
      // Prisma's pool holds an open connection too.
      expect((await viaPrisma()).status).toBe(200);
      // A long statement in flight when the network goes silent fails too.
      const inFlight = t.services.db.query("SELECT pg_sleep(20)").then(
        () => null,
        (e: unknown) => e,
      );
      proxy.stall();
      const firsts = await Promise.all([read(), viaPrisma()]);
      for (const first of firsts) {
        const headers = first.headers as Record<string, unknown>;
        expect([first.status, first.body, headers["retry-after"] ?? headers["Retry-After"]]).toEqual([
          503,
          DATABASE_UNAVAILABLE,
          "1",
        ]);
        // The bound (2 s) and the probe's (2 s), or at most the connect timeout (5 s) for a request
        // that was opening a connection: far from STATEMENT_TIMEOUT_MS's 30 s + 5 s.
        expect(first.ms).toBeLessThan(7000);
      }
      expect(mapError(await inFlight).body).toEqual(DATABASE_UNAVAILABLE);
      // Held down: the next requests are refused at once, not after another wait.
      for (const next of [await read(), await viaPrisma()]) {
        expect([next.status, next.body]).toEqual([503, DATABASE_UNAVAILABLE]);
        expect(next.ms).toBeLessThan(1000);
      }
      const ready = await probe("/readyz");
      expect(ready.statusCode).toBe(503);
      expect(ready.json().details.database).toMatch(/^unreachable/);
      await eventually(async () => (await probe("/healthz")).json().dependencies.database === "down", {
        what: "the database shown down",
      });

      proxy.restore();
      await eventually(async () => (await probe("/readyz")).statusCode === 200, {
        what: "ready again",
        timeoutMs: 20_000,
      });
      expect((await read()).status).toBe(200);
      expect((await viaPrisma()).status).toBe(200);
    }, 60_000);
  });

if (TEST_DATABASE_URL)
  describe("the read replica (DATABASE_READ_URL) cut and restored", () => {
    let proxy: Awaited<ReturnType<typeof faultyProxy>>;
    let t: TestApp;
    let token: string;
    // The replica is the same database, through a proxy of the test's.
    appThroughFaultyProxy("replicaThrough", (made) => {
      ({ proxy, t, token } = made);
    });

    const probe = (url: string) => t.app.inject({ method: "GET", url });
    const read = async () => {
      const res = await t.app.inject({
        method: "GET",
        url: "/api/v4/core/CITY?source=anag-3",
        headers: bearer(token),
      });
      return { status: res.statusCode, rows: (res.json().data ?? []).length as number };
    };
    const fallbacks = async () => {
      const line = (await probe("/metrics")).body
        .split("\n")
        .find((l) => l.startsWith("dimensio_read_replica_fallbacks_total"));
      return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
    };
    const replicaState = async () => (await probe("/healthz")).json().dependencies.database_read;

    it("reads go to the primary while the replica is down (ready, counted), and back to the replica once it answers", async () => {
      const healthy = await read();
      expect(healthy.status).toBe(200);
      expect(healthy.rows).toBeGreaterThan(0);
      expect(await replicaState()).toBe("up");
      expect(dependencyUp((await probe("/metrics")).body, "database_read")).toBe(1);
      // Reads went to the replica: its connections came through the proxy, no read fell back.
      expect(proxy.connections()).toBeGreaterThan(0);
      expect(await fallbacks()).toBe(0);

      proxy.cut();
      // Each read is answered, by the primary, and counted.
      for (let i = 0; i < 3; i++) expect(await read()).toEqual(healthy);
      expect(await fallbacks()).toBeGreaterThanOrEqual(3);
      expect(await replicaState()).toBe("down");
      expect(dependencyUp((await probe("/metrics")).body, "database_read")).toBe(0);
      // The primary serves every read: still ready.
      const ready = await probe("/readyz");
      expect(ready.statusCode).toBe(200);
      expect(ready.json()).toEqual({ status: "ready", checks: { database: "ok", migrations: "ok" } });

      proxy.restore();
      const before = proxy.connections();
      await eventually(async () => (await replicaState()) === "up", { what: "the replica back up" });
      const counted = await fallbacks();
      expect(await read()).toEqual(healthy);
      // Served by the replica again: no fallback counted, and it connected anew through the proxy.
      expect(await fallbacks()).toBe(counted);
      expect(proxy.connections()).toBeGreaterThan(before);
      expect(dependencyUp((await probe("/metrics")).body, "database_read")).toBe(1);
    }, 30_000);
  });

if (TEST_DATABASE_URL)
  describe("the PostgreSQL connection cut and restored", () => {
    let proxy: Proxy;
    let t: TestApp;
    let runtime: EventRuntime;
    let direct: DatabaseHandle;
    let token: string;
    const events: OutboxMessage[] = [];
    let stopFeed: () => Promise<void>;

    beforeAll(async () => {
      proxy = await proxyTo(TEST_DATABASE_URL!, 5432);
      t = await createTestApp("postgres", {
        fixture: "sample",
        databaseThrough: proxy.port,
        // The relay's safety-net poll is far away: what it publishes after the cut, a wake-up did.
        env: {
          ...UNLIMITED_ENV,
          LOGIN_RATE_LIMIT_PER_IP_PER_MINUTE: "0",
          LOGIN_RATE_LIMIT_PER_USERNAME_PER_MINUTE: "0",
          RATE_LIMIT_ANONYMOUS_PER_MINUTE: "0",
          EVENTS_POLL_MS: "600000",
          SESSION_CACHE_MS: "0",
        },
      });
      // Everything ROLE=all runs: the relay, the webhook worker and the subscribers, all of which
      // meet the outage.
      runtime = await startEventRuntime(t.services, eventPartsOf("all")!);
      stopFeed = await t.services.feed.listen((m) => void events.push(m));
      direct = directTo(t.services.db);
      token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    });
    afterAll(async () => {
      proxy?.restore();
      await stopFeed?.();
      await runtime?.stop();
      await direct?.close();
      await t?.close();
      await proxy?.close();
    });

    const send = async (
      method: "GET" | "POST",
      url: string,
      payload?: unknown,
      auth: "token" | "none" = "token",
    ): Promise<Answer> => {
      const started = performance.now();
      const res = await t.app.inject({
        method,
        url,
        headers: auth === "token" ? bearer(token) : {},
        ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
      });
      return {
        status: res.statusCode,
        headers: res.headers,
        body: res.body ? res.json() : null,
        ms: performance.now() - started,
      };
    };
    let n = 0;
    const createCity = () => {
      const id = `DB${++n}`;
      return send("POST", "/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: id, NAME: `Fault ${id}`, COUNTRY: "IT" },
      }).then((a) => ({ ...a, id }));
    };
    const probe = (url: string) => t.app.inject({ method: "GET", url });

    it("cut under load: 503 DATABASE_UNAVAILABLE with Retry-After within seconds, no 500; restored: everything works again", async () => {
      expect((await probe("/readyz")).statusCode).toBe(200);
      expect((await createCity()).status).toBe(201);
      // Webhook registrations go through Prisma (a pool of its own).
      expect((await send("GET", "/api/v4/webhooks")).status).toBe(200);

      // Load until told to stop: REST writes and reads, GraphQL reads, logins.
      const answers: Answer[] = [];
      const graphql: Answer[] = [];
      let loading = true;
      const worker = async (i: number) => {
        while (loading) {
          if (i % 4 === 0) answers.push(await createCity());
          else if (i % 4 === 1) answers.push(await send("GET", "/api/v4/core/CITY?source=anag-3"));
          else if (i % 4 === 2)
            graphql.push(
              await send("POST", "/graphql", {
                query: `{ CITY(source: "anag-3", limit: 5) { data { CITY_ID } } }`,
              }),
            );
          else answers.push(await send("POST", "/auth/login", SAMPLE_USERS.marco, "none"));
          // Paced: a refusal comes back in a millisecond.
          await new Promise((r) => setTimeout(r, 5));
        }
      };
      const workers = Promise.all([0, 1, 2, 3, 4, 5, 6, 7].map(worker));
      await eventually(() => answers.filter((a) => a.status === 201).length >= 10, {
        what: "writes under load",
      });

      const cutAt = answers.length;
      const graphqlCutAt = graphql.length;
      proxy.cut();
      // A change of the metadata while the listening connection is down: its NOTIFY is missed.
      await writeDimension(direct, "FLTA", "written during the outage");
      // A few seconds of outage, so that attempts to listen again fail too, under load.
      const cutTime = performance.now();
      await eventually(
        () =>
          performance.now() - cutTime >= 3000 &&
          answers.slice(cutAt).filter((a) => a.status === 503).length >= 12,
        { what: "503s after the cut" },
      );

      // Not ready, within the probe's own bound; alive, with the database shown down.
      const started = performance.now();
      const ready = await probe("/readyz");
      expect(performance.now() - started).toBeLessThan(3000);
      expect(ready.statusCode).toBe(503);
      expect(ready.json()).toMatchObject({ code: "NOT_READY", status: 503 });
      expect(ready.json().details.database).toMatch(/^unreachable/);
      const hooks = await send("GET", "/api/v4/webhooks");
      expect([hooks.status, hooks.body, hooks.headers["retry-after"]]).toEqual([
        503,
        DATABASE_UNAVAILABLE,
        "1",
      ]);
      expect(hooks.ms).toBeLessThan(7000);
      // Liveness answers at once (the last state it knows past 250 ms), always 200.
      await eventually(
        async () => {
          const started = performance.now();
          const health = await probe("/healthz");
          expect(health.statusCode).toBe(200);
          expect(performance.now() - started).toBeLessThan(1000);
          return health.json().dependencies.database === "down";
        },
        { what: "the database shown down" },
      );
      await eventually(async () => dependencyUp((await probe("/metrics")).body, "database") === 0, {
        what: "dimensio_dependency_up 0",
      });

      loading = false;
      await workers;
      const afterCut = answers.slice(cutAt);
      // Every answer is a success (a request that ran before the cut) or the standard 503.
      expect(
        afterCut.filter((a) => ![200, 201, 503].includes(a.status)).map((a) => [a.status, a.body]),
      ).toEqual([]);
      for (const a of afterCut.filter((x) => x.status === 503)) {
        expect(a.body).toEqual(DATABASE_UNAVAILABLE);
        expect(a.headers["retry-after"]).toBe("1");
        // Refused, not hung: within the pool's connect timeout (5 s) and some slack.
        expect(a.ms).toBeLessThan(7000);
      }
      expect(afterCut.some((a) => a.status === 503 && a.body && a.headers["retry-after"])).toBe(true);
      // GraphQL: the same code in its errors' extensions, never INTERNAL_ERROR.
      const graphqlErrors = graphql
        .slice(graphqlCutAt)
        .flatMap((a) => (a.body?.errors ?? []) as { extensions?: { code?: string } }[])
        .map((e) => e.extensions?.code);
      expect(graphqlErrors.length).toBeGreaterThan(0);
      expect(new Set(graphqlErrors)).toEqual(new Set(["DATABASE_UNAVAILABLE"]));

      proxy.restore();
      await eventually(async () => (await probe("/readyz")).statusCode === 200, {
        what: "ready again",
        timeoutMs: 20_000,
      });
      const written = await eventually(
        async () => {
          const a = await createCity();
          return a.status === 201 ? a : undefined;
        },
        { what: "a write to succeed again", timeoutMs: 20_000 },
      );
      expect((await send("GET", `/api/v4/core/CITY/${written.id}?source=anag-3`)).body.data).toMatchObject({
        CITY_ID: written.id,
      });
      // The relay publishes again: the write made after the restore reaches the event feed.
      await eventually(() => events.some((e) => e.AGGREGATE_ID === written.id), {
        what: "the new write's event on the feed",
        timeoutMs: 20_000,
      });
      // The listening connection is back: the change whose NOTIFY was missed is loaded...
      await eventually(() => t.services.metadata.current().dimensions.has("FLTA"), {
        what: "the metadata changed during the outage",
        timeoutMs: 20_000,
      });
      // ...and a change made now reaches this process by NOTIFY (the registry does not poll).
      await writeDimension(direct, "FLTB", "written after the restore");
      await eventually(() => t.services.metadata.current().dimensions.get("FLTB")?.description, {
        what: "the metadata change by NOTIFY",
      });
      await eventually(async () => (await probe("/healthz")).json().dependencies.database === "up", {
        what: "the database shown up",
      });
      expect((await send("GET", "/api/v4/webhooks")).status).toBe(200);
      expect(dependencyUp((await probe("/metrics")).body, "database")).toBe(1);
    }, 90_000);
  });

if (TEST_DATABASE_URL && TEST_AMQP_URL)
  describe("the broker cut", () => {
    let broker: Proxy;
    let t: TestApp;
    let runtime: EventRuntime;

    beforeAll(async () => {
      broker = await proxyTo(TEST_AMQP_URL!, 5672);
      const viaProxy = new URL(TEST_AMQP_URL!);
      viaProxy.hostname = "127.0.0.1";
      viaProxy.port = String(broker.port);
      t = await createTestApp("postgres", {
        fixture: "sample",
        env: {
          ...UNLIMITED_ENV,
          AMQP_URL: viaProxy.toString(),
          EVENTS_EXCHANGE: `dimensio.test.faults.${process.pid}`,
        },
      });
      runtime = await startEventRuntime(t.services, { relay: true });
      // The broker connection opens on first use: a subscriber of the test's.
      await t.services.bus.subscribe("faults-test", async () => {}, { durable: false });
    });
    afterAll(async () => {
      broker?.restore();
      await runtime?.stop();
      await t?.close();
      await broker?.close();
    });

    it("/readyz stays ready while the broker is away; /healthz and /metrics show the broker down", async () => {
      const probe = (url: string) => t.app.inject({ method: "GET", url });
      await eventually(async () => (await probe("/healthz")).json().dependencies.broker === "up", {
        what: "the broker connected",
      });
      expect(dependencyUp((await probe("/metrics")).body, "broker")).toBe(1);

      broker.cut();
      await eventually(async () => (await probe("/healthz")).json().dependencies.broker === "down", {
        what: "the broker seen down",
      });
      const ready = await probe("/readyz");
      expect(ready.statusCode).toBe(200);
      expect(ready.json()).toEqual({ status: "ready", checks: { database: "ok", migrations: "ok" } });
      expect(dependencyUp((await probe("/metrics")).body, "broker")).toBe(0);

      broker.restore();
      await eventually(async () => (await probe("/healthz")).json().dependencies.broker === "up", {
        what: "the broker back",
        timeoutMs: 30_000,
      });
      expect(dependencyUp((await probe("/metrics")).body, "broker")).toBe(1);
    }, 60_000);
  });

if (TEST_DATABASE_URL)
  describe("npm start on PostgreSQL, the connection cut and restored", () => {
    let proxy: Proxy;
    let name: string;
    beforeAll(async () => {
      proxy = await proxyTo(TEST_DATABASE_URL!, 5432);
      name = `dimensio_t_faults_${process.pid}`;
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL! });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.query(`CREATE DATABASE "${name}"`);
      await admin.end();
    });
    afterAll(async () => {
      await proxy?.close();
      const admin = new pg.Client({ connectionString: TEST_DATABASE_URL! });
      await admin.connect();
      await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      await admin.end();
    });

    it("the process answers 503s, logs the lost connections, does not exit, and is ready again once restored", async () => {
      const url = new URL(TEST_DATABASE_URL!);
      url.hostname = "127.0.0.1";
      url.port = String(proxy.port);
      url.pathname = `/${name}`;
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const running = spawnStart({
        DATABASE_URL: url.toString(),
        PORT: String(port),
        DEMO_DATA: "false",
        LOGIN_RATE_LIMIT_PER_IP_PER_MINUTE: "0",
        LOGIN_RATE_LIMIT_PER_USERNAME_PER_MINUTE: "0",
        JWT_SECRET: "faults-test-secret-faults-test-secret-0123",
      });
      const login = () =>
        fetch(`${base}/auth/login`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ username: "nobody", password: "not-a-password" }),
        });
      try {
        await waitReady(base, running);
        expect((await login()).status).toBe(401);

        proxy.cut();
        const cutTime = performance.now();
        const statuses = new Set<number>();
        while (performance.now() - cutTime < 3000) {
          const res = await login();
          statuses.add(res.status);
          if (res.status === 503) {
            expect(await res.json()).toEqual(DATABASE_UNAVAILABLE);
            expect(res.headers.get("retry-after")).toBe("1");
          } else await res.body?.cancel();
          await new Promise((r) => setTimeout(r, 50));
        }
        expect([...statuses].filter((s) => s !== 401 && s !== 503)).toEqual([]);
        expect(statuses.has(503)).toBe(true);
        expect((await fetch(`${base}/readyz`)).status).toBe(503);
        await eventually(
          async () =>
            ((await (await fetch(`${base}/healthz`)).json()) as { dependencies: Record<string, string> })
              .dependencies.database === "down",
          { what: "the database shown down" },
        );

        proxy.restore();
        await eventually(async () => (await fetch(`${base}/readyz`)).status === 200, {
          what: "ready again",
          timeoutMs: 20_000,
        });
        expect((await login()).status).toBe(401);
        expect(running.child.exitCode).toBeNull();
        expect(running.output()).toContain("database connection lost");
      } finally {
        running.child.kill("SIGTERM");
      }
      expect(await running.exited).toBe(0);
    }, 120_000);
  });

describe("object storage's state in /healthz and /metrics (S3 through a proxy to s3rver)", () => {
  let s3: S3rver;
  let dir: string;
  let proxy: Proxy;
  let t: TestApp;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dimensio-s3-faults-"));
    s3 = new S3rver({
      port: 0,
      address: "127.0.0.1",
      silent: true,
      directory: dir,
      configureBuckets: [{ name: "media", configs: [] }],
    });
    const { port } = (await s3.run()) as net.AddressInfo;
    proxy = await tcpProxy("127.0.0.1", port);
    t = await createTestApp("pglite", {
      env: {
        S3_ENDPOINT: `http://127.0.0.1:${proxy.port}`,
        S3_BUCKET: "media",
        S3_ACCESS_KEY_ID: "S3RVER",
        S3_SECRET_ACCESS_KEY: "S3RVER",
        S3_FORCE_PATH_STYLE: "true",
      },
    });
  });
  afterAll(async () => {
    await t?.close();
    await proxy?.close();
    await s3?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("up after the start's bucket check and after an answer (a 404 too), down after a refused request, up again", async () => {
    const media = async () =>
      (await t.app.inject({ method: "GET", url: "/healthz" })).json().dependencies.media;
    const gauge = async () =>
      dependencyUp((await t.app.inject({ method: "GET", url: "/metrics" })).body, "media");
    // The start asked for the bucket (src/media/s3-store.ts): its answer is the first state.
    expect(await media()).toBe("up");
    expect(await gauge()).toBe(1);
    expect(await t.services.media.size("nothing/here")).toBeNull();
    expect(await media()).toBe("up");
    expect(await gauge()).toBe(1);

    proxy.cut();
    await expect(t.services.media.size("nothing/here")).rejects.toThrow();
    expect(await media()).toBe("down");
    expect(await gauge()).toBe(0);
    // Readiness does not depend on object storage.
    expect((await t.app.inject({ method: "GET", url: "/readyz" })).statusCode).toBe(200);

    proxy.restore();
    expect(await t.services.media.size("nothing/here")).toBeNull();
    expect(await media()).toBe("up");
  });
});
