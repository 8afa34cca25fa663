// GraphQL over WebSocket (decisions.md §21; issue 38 §1) with the real `graphql-ws` client against a
// listening server on loopback: queries, mutations and subscriptions through the same chain as
// HTTP (same answers, same refusals), authentication in connection_init (4401), logout closing a
// live subscription's socket (4401), a change of grants ending a live subscription, the write
// budget, the caps per user.
import type { AddressInfo } from "node:net";
import { type Client, createClient, type ExecutionResult } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { eventually } from "../events/support.ts";
import { client, NO_RATE_LIMITS } from "../write/http.ts";
import { graphqlClient } from "./helpers.ts";

const MAX_BATCH_SIZE = 5;

/** What the client's `closed` event carries (a ws CloseEvent). */
interface CloseEvent {
  code: number;
  reason: string;
}

interface Operation {
  results: ExecutionResult[];
  /** Resolves when the operation completes or fails: the error (GraphQL errors or a close), or null. */
  done: Promise<unknown>;
  dispose: () => void;
}

interface Socket {
  client: Client;
  /** The close event of the socket, once it closed. */
  closed: Promise<CloseEvent>;
  run(query: string, variables?: Record<string, unknown>): Operation;
}

describe.each(BACKENDS)("GraphQL over WebSocket (%s)", (backend) => {
  let t: TestApp;
  let url: string;
  let runtime: EventRuntime;
  const tokens: Record<string, string> = {};
  const open: Socket[] = [];

  /** A socket whose connection_init carries `authorization`, and its upgrade request `header`. */
  function connect(authorization: string | undefined, header?: string): Socket {
    let onClosed: (e: CloseEvent) => void = () => {};
    const closed = new Promise<CloseEvent>((resolve) => {
      onClosed = resolve;
    });
    const c = createClient({
      url,
      webSocketImpl:
        header === undefined
          ? WebSocket
          : class extends WebSocket {
              constructor(address: string, protocols?: string | string[]) {
                super(address, protocols, { headers: { authorization: header } });
              }
            },
      lazy: false,
      retryAttempts: 0,
      onNonLazyError: () => {},
      connectionParams: authorization === undefined ? undefined : { authorization },
      on: { closed: (e) => onClosed(e as CloseEvent) },
    });
    const socket: Socket = {
      client: c,
      closed,
      run(query, variables) {
        const results: ExecutionResult[] = [];
        let dispose: () => void = () => {};
        const done = new Promise<unknown>((resolve) => {
          dispose = c.subscribe(
            { query, variables },
            {
              next: (r) => results.push(r as ExecutionResult),
              error: (err) => resolve(err),
              complete: () => resolve(null),
            },
          );
        });
        return { results, done, dispose };
      },
    };
    open.push(socket);
    return socket;
  }

  const once = async (socket: Socket, query: string, variables?: Record<string, unknown>) => {
    const op = socket.run(query, variables);
    const error = await op.done;
    return { results: op.results, error };
  };

  /** Creates cities until `op` has received an event (it is live once one arrives). */
  async function untilLive(op: Operation, token: string, prefix: string) {
    let n = 0;
    await eventually(
      async () => {
        if (op.results.length) return true;
        const res = await client(t.app, token).post("/api/v4/core/CITY?source=anag-3", {
          data: { CITY_ID: `${prefix}${++n}`, NAME: `City ${n}`, COUNTRY: "IT" },
        });
        expect(res.status).toBe(201);
        await new Promise<void>((resolve) => setImmediate(resolve));
        return op.results.length > 0;
      },
      { what: "the subscription's first event" },
    );
  }

  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        EVENTS_POLL_MS: "60000",
        MAX_BATCH_SIZE: String(MAX_BATCH_SIZE),
        SUBSCRIPTIONS_MAX_PER_USER: "2",
        WS_MAX_SOCKETS_PER_USER: "3",
      },
    });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    url = `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/graphql`;
    for (const user of ["anna", "greta", "lucia"] as const) {
      tokens[user] = await loginAs(t.app, SAMPLE_USERS[user].username, SAMPLE_USERS[user].password);
    }
    runtime = await startEventRuntime(t.services, { relay: true });
    await eventually(
      async () => {
        const { rows } = await t.services.db.query<{ n: number }>(
          `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`,
        );
        return rows[0]!.n === 0;
      },
      { what: "the fixture's events published" },
    );
  });
  afterAll(async () => {
    for (const s of open) await s.client.dispose();
    await runtime?.stop();
    await t?.close();
  });

  it("a query answers as POST /graphql does; a mutation writes", async () => {
    const ws = connect(`Bearer ${tokens.anna}`);
    const query = `{ CUST(source: "anag-1", limit: 5) { data { CUST_ID NAME } meta { total } } }`;
    const viaWs = await once(ws, query);
    const viaHttp = await graphqlClient(t.app, tokens.anna!)(query);
    expect(viaWs.error).toBeNull();
    expect(viaWs.results).toEqual([viaHttp.body]);
    expect(viaHttp.body.data.CUST.data.length).toBeGreaterThan(0);

    const created = await once(
      ws,
      `mutation { CUST_create(source: "anag-1", data: { NAME: "Via socket" }) { event_id } }`,
    );
    expect(created.error).toBeNull();
    expect(created.results[0]!.errors).toBeUndefined();
    const { rows } = await t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_CUST00" WHERE "NAME" = 'Via socket'`,
    );
    expect(rows[0]!.n).toBe(1);
    await ws.client.dispose();
  });

  it("a subscription receives its tenant's events", async () => {
    const ws = connect(`Bearer ${tokens.greta}`);
    const op = ws.run(`subscription { CITY_events(source: "anag-3") { event_type dimension record_id } }`);
    await untilLive(op, tokens.greta!, "WG");
    expect(op.results[0]!.data).toEqual({
      CITY_events: {
        event_type: "CITYCreated",
        dimension: "CITY",
        record_id: expect.stringMatching(/^WG\d+$/),
      },
    });
    op.dispose();
    await ws.client.dispose();
  });

  it("one event is serialised once per field set: subscribers of the same fields share its bytes", async () => {
    const results = async () => {
      const { values } = await t.services.metrics.graphqlWsEventResults.get();
      const of = (by: string) => values.find((v) => v.labels.by === by)?.value ?? 0;
      return { serialised: of("serialised"), shared: of("shared") };
    };
    const full = `subscription { CUST_events(source: "anag-1") { event_type record_id data } }`;
    const idOnly = `subscription { CUST_events(source: "anag-1") { record_id } }`;
    // anna on two sockets (one field set); lucia, whose peso hides CREDIT_LIMIT, with the same
    // document (another view of the event: another field set) and with another document.
    const [annaA, annaB, luciaSocket] = [
      connect(`Bearer ${tokens.anna}`),
      connect(`Bearer ${tokens.anna}`),
      connect(`Bearer ${tokens.lucia}`),
    ];
    const ops = [annaA.run(full), annaB.run(full), luciaSocket.run(full), luciaSocket.run(idOnly)];
    const writer = client(t.app, tokens.anna!);
    const create = async (name: string) => {
      const res = await writer.post("/api/v4/core/CUST?source=anag-1", {
        data: { NAME: name, CREDIT_LIMIT: 1500 },
      });
      expect(res.status).toBe(201);
      return String(res.body.data.CUST_ID);
    };
    /** Whether every subscription's latest result is the event of record `id`. */
    const everyoneHas = (id: string) =>
      ops.every((op) => (op.results.at(-1)?.data?.CUST_events as { record_id?: string })?.record_id === id);
    try {
      // Live once every subscription has the event of one create (and so every earlier one).
      await eventually(
        async () => {
          const warmUp = await create("Shared bytes warm-up");
          try {
            return await eventually(() => everyoneHas(warmUp), { timeoutMs: 1000, what: "the warm-up" });
          } catch {
            return false;
          }
        },
        { what: "every subscription live" },
      );
      const before = await results();
      const id = await create("Shared bytes");
      await eventually(() => everyoneHas(id), { what: "the event at every subscriber" });
      const after = await results();
      expect({
        serialised: after.serialised - before.serialised,
        shared: after.shared - before.shared,
      }).toEqual({ serialised: 3, shared: 1 });
      const [a, b, l, lId] = ops.map((op) => op.results.at(-1)!);
      expect(a).toEqual(b);
      expect(a!.data).toMatchObject({
        CUST_events: {
          event_type: "CUSTCreated",
          record_id: id,
          data: { NAME: "Shared bytes", CREDIT_LIMIT: 1500 },
        },
      });
      expect(l!.data).toMatchObject({ CUST_events: { record_id: id, data: { NAME: "Shared bytes" } } });
      expect(l!.data!.CUST_events).not.toHaveProperty("data.CREDIT_LIMIT");
      expect(lId).toEqual({ data: { CUST_events: { record_id: id } } });
    } finally {
      for (const op of ops) op.dispose();
      for (const s of [annaA, annaB, luciaSocket]) await s.client.dispose();
    }
  });

  it("no token or a bad one closes the socket with 4401", async () => {
    const bad = connect("Bearer not-a-token");
    expect((await bad.closed).code).toBe(4401);
    const none = connect(undefined);
    const closed = await none.closed;
    expect(closed.code).toBe(4401);
    expect(closed.reason).toContain("bearer token is required");
  });

  it("the upgrade request's Authorization header authenticates a socket; connection_init's token, when given, is the one used", async () => {
    const query = `{ CUST(source: "anag-1", limit: 1) { data { CUST_ID } } }`;
    const byHeader = connect(undefined, `Bearer ${tokens.anna}`);
    const answered = await once(byHeader, query);
    expect(answered.error).toBeNull();
    expect(answered.results[0]!.errors).toBeUndefined();
    expect((answered.results[0]!.data as { CUST: { data: unknown[] } }).CUST.data).toHaveLength(1);
    await byHeader.client.dispose();

    const initWins = connect(`Bearer ${tokens.anna}`, "Bearer not-a-token");
    expect((await once(initWins, query)).results[0]!.errors).toBeUndefined();
    await initWins.client.dispose();
    const badInit = connect("Bearer not-a-token", `Bearer ${tokens.anna}`);
    expect((await badInit.closed).code).toBe(4401);
  });

  it("logout closes the socket of a live subscription with 4401, after the subscription's error", async () => {
    const token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    const ws = connect(`Bearer ${token}`);
    const op = ws.run(`subscription { CITY_events(source: "anag-3") { record_id } }`);
    await untilLive(op, tokens.anna!, "WL");
    const out = await t.app.inject({ method: "POST", url: "/auth/logout", headers: bearer(token) });
    expect(out.statusCode).toBeLessThan(300);
    const closed = await ws.closed;
    expect(closed.code).toBe(4401);
    const last = op.results.at(-1)!;
    expect(last.errors?.[0]?.extensions?.code).toBe("TOKEN_INVALID");
  });

  it("a change of the user's grants ends a live subscription at once (its error, then complete); the socket stays", async () => {
    const ws = connect(`Bearer ${tokens.lucia}`);
    const subscription = `subscription { CUST_events(source: "anag-1") { event_type record_id } }`;
    const op = ws.run(subscription);
    // Live once an event arrives: customers are created until one does.
    const writer = client(t.app, tokens.anna!);
    await eventually(
      async () => {
        if (op.results.length) return true;
        const res = await writer.post("/api/v4/core/CUST?source=anag-1", { data: { NAME: "Grant watch" } });
        expect(res.status).toBe(201);
        await new Promise<void>((resolve) => setImmediate(resolve));
        return op.results.length > 0;
      },
      { what: "the subscription's first event" },
    );
    const live = op.results.length;
    // lucia may no longer read anag-1 (the safety-net poll is a minute away: the notice ends it).
    await t.services.db.query(
      `UPDATE "TB_USER_GRANT" SET "OPERATIONS" = '{}' WHERE "USER_ID" = 'lucia' AND "COD_MENU" = 'anag-1'`,
    );
    try {
      const ended = await Promise.race([
        op.done,
        new Promise((_, reject) => setTimeout(() => reject(new Error("the subscription went on")), 10_000)),
      ]);
      expect(ended).toBeNull();
      expect(op.results).toHaveLength(live + 1);
      expect(op.results.at(-1)).toEqual({
        errors: [
          {
            message: "The user's grants changed since the subscription started; subscribe again.",
            extensions: { code: "GRANTS_CHANGED", status: 403 },
          },
        ],
      });
      // The socket stays open for what the user may still do; the subscription again is refused.
      expect(await once(ws, "{ __typename }")).toEqual({
        results: [{ data: { __typename: "Query" } }],
        error: null,
      });
      const again = await once(ws, subscription);
      // Her schema no longer has the field: refused before it runs, as over HTTP.
      const viaHttp = await graphqlClient(t.app, tokens.lucia!)(subscription);
      expect(again).toEqual({ results: [], error: viaHttp.body.errors });
      expect(viaHttp.body.errors[0].message).toContain('Cannot query field "CUST_events"');
    } finally {
      await t.services.db.query(
        `UPDATE "TB_USER_GRANT" SET "OPERATIONS" = '{read}' WHERE "USER_ID" = 'lucia' AND "COD_MENU" = 'anag-1'`,
      );
    }
    await ws.client.dispose();
  });

  it("documents over the limits are refused with the same error as over HTTP", async () => {
    const ws = connect(`Bearer ${tokens.lucia}`);
    const inner = Array.from({ length: 40 }, (_, j) => `f${j}: fields { name }`).join(" ");
    const complex = `{ ${Array.from({ length: 40 }, (_, i) => `t${i}: __type(name: "Mutation") { ${inner} }`).join(" ")} }`;
    const large = `{ __typename ${"a: __typename ".repeat(6000)}}`;
    for (const [document, code] of [
      [complex, "QUERY_TOO_COMPLEX"],
      [large, "DOCUMENT_TOO_LARGE"],
    ] as const) {
      const viaHttp = await graphqlClient(t.app, tokens.lucia!)(document);
      const viaWs = await once(ws, document);
      expect(viaWs.results).toEqual([]);
      expect(viaWs.error).toEqual(viaHttp.body.errors);
      expect((viaWs.error as { extensions: { code: string } }[])[0]!.extensions.code).toBe(code);
    }
    await ws.client.dispose();
  });

  it("a mutation over the write budget is refused whole: nothing is written", async () => {
    const ws = connect(`Bearer ${tokens.anna}`);
    const creates = Array.from(
      { length: 8 },
      (_, i) => `c${i}: CUST_create(source: "anag-1", data: { NAME: "Socket alias ${i}" }) { event_id }`,
    ).join(" ");
    const res = await once(ws, `mutation { ${creates} }`);
    expect(res.results).toHaveLength(1);
    expect(res.results[0]!.data).toBeNull();
    expect(res.results[0]!.errors?.[0]?.extensions).toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
      status: 413,
      details: { max_batch_size: MAX_BATCH_SIZE, count: 8 },
    });
    const { rows } = await t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_CUST00" WHERE "NAME" LIKE 'Socket alias %'`,
    );
    expect(rows[0]!.n).toBe(0);
    await ws.client.dispose();
  });

  it("a user's subscriptions and sockets are capped", async () => {
    // marco: a user no other test connects with, so that only this test's sockets count.
    const token = await loginAs(t.app, SAMPLE_USERS.marco.username, SAMPLE_USERS.marco.password);
    const sub = `subscription { CUST_events(source: "anag-1") { record_id } }`;
    const ws = connect(`Bearer ${token}`);
    const ops = [ws.run(sub), ws.run(sub), ws.run(sub)];
    // One of the three (in whichever order they were admitted) is refused, the others stay live.
    const refused = await Promise.race(ops.map((op, i) => op.done.then(() => i)));
    expect(ops[refused]!.results[0]!.errors?.[0]?.extensions).toMatchObject({
      code: "TOO_MANY_SUBSCRIPTIONS",
      status: 429,
    });
    for (const op of ops) op.dispose();

    // WS_MAX_SOCKETS_PER_USER (3): the fourth socket of one user is closed with 4429.
    const more = [ws, connect(`Bearer ${token}`), connect(`Bearer ${token}`)];
    for (const s of more.slice(1)) {
      const res = await once(s, "{ __typename }");
      expect(res).toEqual({ results: [{ data: { __typename: "Query" } }], error: null });
    }
    const fourth = connect(`Bearer ${token}`);
    expect((await fourth.closed).code).toBe(4429);
    for (const s of more) await s.client.dispose();
  });
});

describe("GraphQL over WebSocket: token expiry", () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, ACCESS_TOKEN_ACTIVE_S: "1", ACCESS_TOKEN_RENEWABLE_S: "2" },
    });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("a socket closes with 4401 at its token's expiry, with no operation running", async () => {
    const token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    const port = (t.app.server.address() as AddressInfo).port;
    const closed = new Promise<CloseEvent>((resolve) => {
      createClient({
        url: `ws://127.0.0.1:${port}/graphql`,
        webSocketImpl: WebSocket,
        lazy: false,
        retryAttempts: 0,
        onNonLazyError: () => {},
        connectionParams: { authorization: `Bearer ${token}` },
        on: { closed: (e) => resolve(e as CloseEvent) },
      });
    });
    const event = await closed;
    expect(event.code).toBe(4401);
    expect(event.reason).toContain("expired");
  });
});

describe("GraphQL over WebSocket: sockets per tenant and per process", () => {
  let t: TestApp;
  let url: string;
  const tokens: Record<string, string> = {};
  const clients: Client[] = [];

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        WS_MAX_SOCKETS_PER_USER: "5",
        WS_MAX_SOCKETS_PER_TENANT: "2",
        WS_MAX_SOCKETS: "3",
      },
    });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    url = `ws://127.0.0.1:${(t.app.server.address() as AddressInfo).port}/graphql`;
    for (const user of ["anna", "lucia", "greta"] as const) {
      tokens[user] = await loginAs(t.app, SAMPLE_USERS[user].username, SAMPLE_USERS[user].password);
    }
  });
  afterAll(async () => {
    for (const c of clients) await c.dispose();
    await t?.close();
  });

  /** A socket of `user`: the answer to `{ __typename }`, or the code it was closed with. */
  function socketOf(user: string): Promise<{ typename: string } | { closed: number }> {
    return new Promise((resolve) => {
      const c = createClient({
        url,
        webSocketImpl: WebSocket,
        lazy: false,
        retryAttempts: 0,
        onNonLazyError: () => {},
        connectionParams: { authorization: `Bearer ${tokens[user]}` },
        on: { closed: (e) => resolve({ closed: (e as CloseEvent).code }) },
      });
      clients.push(c);
      c.subscribe(
        { query: "{ __typename }" },
        {
          next: (r) => resolve({ typename: String((r.data as { __typename: string }).__typename) }),
          error: () => {},
          complete: () => {},
        },
      );
    });
  }

  it("a tenant's sockets beyond WS_MAX_SOCKETS_PER_TENANT close with 4429, the process's beyond WS_MAX_SOCKETS with 1013", async () => {
    // anna and lucia are acme's: two sockets, then a third of either user is refused.
    expect(await socketOf("anna")).toEqual({ typename: "Query" });
    expect(await socketOf("lucia")).toEqual({ typename: "Query" });
    expect(await socketOf("anna")).toEqual({ closed: 4429 });
    // greta (globex) takes the process's third socket; a fourth is refused whatever its tenant.
    expect(await socketOf("greta")).toEqual({ typename: "Query" });
    expect(await socketOf("greta")).toEqual({ closed: 1013 });
    // A socket that closes gives its place back.
    await clients[0]!.dispose();
    await eventually(async () => "typename" in (await socketOf("anna")), { what: "a place freed" });
  });
});
