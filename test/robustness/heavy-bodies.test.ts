// Large bodies take turns per tenant (HEAVY_BODY_BYTES; src/http/protected.ts): parsing a body of
// megabytes holds the event loop, so one tenant's large bodies are parsed one at a time per process
// (in its heavy lane), while another tenant's large bodies and everyone's small requests go on.
// The caller is authenticated before a byte of a large body is read: no token, no reading. The body
// is received whole before its turn is taken (exploratory test "security", finding 2): a body sent
// slowly holds no turn, and the route's body limit still bounds what is kept of it.
// Real sockets on loopback: the test holds a body unfinished, or (on PostgreSQL) the first large
// request's statement behind a table lock, and waits on what the server did.
import type { IncomingMessage, Server } from "node:http";
import net from "node:net";
import type { FastifyRequest } from "fastify";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../events/support.ts";
import { heavyGauge } from "./support.ts";
import { loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { type Backend, createTestApp, TEST_DATABASE_URL, type TestApp } from "../helpers/env.ts";
import { isLargeBody } from "../../src/http/protected.ts";

const BODY_BYTES = 4096;
/** The routes' body limit here (BODY_LIMIT_BYTES): a few large bodies, not megabytes. */
const BODY_LIMIT = 64 * 1024;

/** A GraphQL POST whose body is `size` bytes (an unused variable pads it). */
function graphqlBody(size: number, query = "{ __typename }"): string {
  const head = `{"query":${JSON.stringify(query)},"variables":{"pad":"`;
  const tail = '"}}';
  return head + "x".repeat(size - head.length - tail.length) + tail;
}

interface RawRequest {
  /** Sends the rest of the body. */
  finish(): void;
  /** The status of the answer, once it comes. */
  status: Promise<number>;
  /** The whole answer, once the server closes the connection. */
  answer: Promise<string>;
  /** Whether an answer has begun to come. */
  answered(): boolean;
}

interface RawOptions {
  token: string | null;
  /** Bytes of the body sent at once (the rest on finish()); all by default. */
  sent?: number;
  /** Sent chunked (no Content-Length), else with its length. */
  chunked?: boolean;
  /** The length announced, when not the body's. */
  announced?: number;
  /** A header that lets the test find the request on the server. */
  marker?: string;
}

/** A POST /graphql on a raw socket, its body sent only up to `sent` bytes until finish(). */
function rawPost(port: number, body: string, o: RawOptions): RawRequest {
  const socket = net.connect(port, "127.0.0.1");
  let text = "";
  let answered = false;
  const status = new Promise<number>((resolve, reject) => {
    socket.on("data", (chunk) => {
      text += chunk.toString("latin1");
      answered = true;
      const match = /^HTTP\/1\.1 (\d{3})/.exec(text);
      if (match) resolve(Number(match[1]));
    });
    socket.on("error", reject);
    socket.on("close", () => reject(new Error(`closed without an answer: ${text}`)));
  });
  status.catch(() => {});
  const answer = new Promise<string>((resolve) => socket.on("close", () => resolve(text)));
  const chunk = (part: string) =>
    part === "" ? "" : `${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`;
  const sent = o.sent ?? body.length;
  const length = o.chunked
    ? "Transfer-Encoding: chunked"
    : `Content-Length: ${o.announced ?? Buffer.byteLength(body)}`;
  const first = body.slice(0, sent);
  socket.write(
    `POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n${length}\r\n` +
      (o.token ? `Authorization: Bearer ${o.token}\r\n` : "") +
      (o.marker ? `X-Test-Marker: ${o.marker}\r\n` : "") +
      "Connection: close\r\n\r\n" +
      (o.chunked ? chunk(first) : first) +
      (o.chunked && sent === body.length ? "0\r\n\r\n" : ""),
  );
  return {
    finish: () => socket.write(o.chunked ? `${chunk(body.slice(sent))}0\r\n\r\n` : body.slice(sent)),
    status,
    answer,
    answered: () => answered,
  };
}

/**
 * Resolves once the server has received body bytes of the request carrying `marker`: its body
 * stream started flowing (someone reads it) and a chunk came. Listening only once it flows
 * takes nothing from the reader.
 */
function bodyBytesArrive(server: Server, marker: string): Promise<void> {
  return new Promise((resolve) => {
    const onRequest = (req: IncomingMessage) => {
      if (req.headers["x-test-marker"] !== marker) return;
      server.off("request", onRequest);
      req.once("resume", () => req.once("data", () => resolve()));
    };
    server.on("request", onRequest);
  });
}

async function startApp(
  backend: Backend,
  env: Record<string, string> = {},
): Promise<{ t: TestApp; port: number; tokens: Record<string, string> }> {
  const t = await createTestApp(backend, {
    fixture: "sample",
    env: {
      ...UNLIMITED_ENV,
      HEAVY_BODY_BYTES: String(BODY_BYTES),
      BODY_LIMIT_BYTES: String(BODY_LIMIT),
      TENANT_HEAVY_REQUESTS: "1",
      TENANT_HEAVY_WAITING: "1",
      ...env,
    },
  });
  const tokens: Record<string, string> = {};
  // anna and marco: tenant A (acme); greta: tenant B.
  for (const who of ["anna", "marco", "greta"] as const) {
    tokens[who] = await loginAs(t.app, SAMPLE_USERS[who].username, SAMPLE_USERS[who].password);
  }
  await t.app.listen({ host: "127.0.0.1", port: 0 });
  return { t, port: (t.app.server.address() as net.AddressInfo).port, tokens };
}

describe("large bodies are received before they take their turn", () => {
  let t: TestApp;
  let port: number;
  let tokens: Record<string, string> = {};

  beforeAll(async () => {
    ({ t, port, tokens } = await startApp("pglite"));
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  it("a slow chunked body holds no turn: another user's large body of the tenant is answered meanwhile", async () => {
    const large = graphqlBody(BODY_BYTES * 4);
    // anna sends the start of a chunked body (unknown length: a large body) and stops.
    const arrived = bodyBytesArrive(t.app.server, "slow");
    const slow = rawPost(port, large, { token: tokens.anna!, sent: 100, chunked: true, marker: "slow" });
    await arrived;
    // Its bytes are being received, and it holds no turn (before, it held the lane from here
    // until REQUEST_TIMEOUT_MS ended it).
    expect(await heavyGauge(t, "running")).toBe(0);
    expect(await heavyGauge(t, "waiting")).toBe(0);

    // marco (the same tenant) sends a large body, chunked and with its length: answered at once.
    expect(await rawPost(port, large, { token: tokens.marco!, chunked: true }).status).toBe(200);
    expect(await rawPost(port, large, { token: tokens.marco! }).status).toBe(200);
    expect(slow.answered()).toBe(false);

    // anna's body ends: it takes its turn, is parsed and answered; the lane empties.
    slow.finish();
    expect(await slow.status).toBe(200);
    expect(await slow.answer).toContain('"__typename":"Query"');
    await eventually(
      async () => (await heavyGauge(t, "running")) === 0 && (await heavyGauge(t, "waiting")) === 0,
    );
  });

  it("the route's body limit bounds what is received: past it, 413 without the rest kept", async () => {
    const tooLarge = graphqlBody(BODY_LIMIT * 2);
    // Announced past the limit: refused before a byte of the body is read (only 100 are sent).
    const announced = rawPost(port, tooLarge, { token: tokens.anna!, sent: 100 });
    expect(await announced.status).toBe(413);
    // Chunked: refused once past the limit (the rest is sent and dropped).
    const chunked = rawPost(port, tooLarge, { token: tokens.anna!, chunked: true });
    expect(await chunked.status).toBe(413);
    const body = JSON.parse((await chunked.answer).slice((await chunked.answer).indexOf("\r\n\r\n") + 4));
    expect(body).toMatchObject({
      errors: [{ extensions: { code: "PAYLOAD_TOO_LARGE", status: 413 } }],
    });
    // A chunked body just under the limit is taken.
    expect(
      await rawPost(port, graphqlBody(BODY_LIMIT - 1), { token: tokens.anna!, chunked: true }).status,
    ).toBe(200);
    expect(await heavyGauge(t, "running")).toBe(0);
  });

  it("a large body without a valid token is refused before it is read", async () => {
    const large = graphqlBody(BODY_BYTES * 4);
    // Only the first 100 bytes are ever sent: the answer cannot wait for the body.
    expect(await rawPost(port, large, { token: null, sent: 100 }).status).toBe(401);
    expect(await rawPost(port, large, { token: "not-a-token", sent: 100 }).status).toBe(401);
    expect(await rawPost(port, large, { token: null, sent: 100, chunked: true }).status).toBe(401);
  });
});

// What a tenant's large bodies hold in memory at once (received, not yet answered) is bounded
// (TENANT_BODY_BUFFER_BYTES): bodies received before their turn would otherwise let one tenant's
// many slow bodies fill the process's memory.
describe("a tenant's large bodies held at once are bounded (TENANT_BODY_BUFFER_BYTES)", () => {
  // More than one body the route takes (BODY_LIMIT), fewer than two.
  const BUFFER = 70_000;
  let t: TestApp;
  let port: number;
  let tokens: Record<string, string> = {};
  beforeAll(async () => {
    ({ t, port, tokens } = await startApp("pglite", { TENANT_BODY_BUFFER_BYTES: String(BUFFER) }));
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  it("past the bound the tenant's next large body is 503 TENANT_BODIES_FULL; another tenant's goes on; freed once answered", async () => {
    const big = graphqlBody(60_000);
    const small = graphqlBody(30_000);
    // anna holds 50,000 bytes of a chunked body and stops.
    const slow = rawPost(port, big, { token: tokens.anna!, sent: 50_000, chunked: true });
    // Once her bytes are counted, marco's 30,000 would pass 70,000: refused, with Retry-After.
    const refused = await eventually(
      async () => {
        const r = rawPost(port, small, { token: tokens.marco!, chunked: true });
        return (await r.status) === 503 ? r : undefined;
      },
      { what: "marco's body refused" },
    );
    const answer = await refused.answer;
    expect(answer).toMatch(/retry-after: 5/i);
    expect(JSON.parse(answer.slice(answer.indexOf("\r\n\r\n") + 4))).toMatchObject({
      errors: [{ extensions: { code: "TENANT_BODIES_FULL", status: 503 } }],
    });
    // greta's tenant has its own bound.
    expect(await rawPost(port, small, { token: tokens.greta!, chunked: true }).status).toBe(200);
    // anna's body ends and is answered: her bytes are given back, and marco's body goes through.
    slow.finish();
    expect(await slow.status).toBe(200);
    await slow.answer;
    expect(await rawPost(port, small, { token: tokens.marco!, chunked: true }).status).toBe(200);
  });
});

// The turn itself: held by a large request whose statement waits behind a table lock the test
// takes (PostgreSQL), so what the lane does meanwhile is seen.
if (TEST_DATABASE_URL)
  describe("large bodies take turns per tenant (PostgreSQL)", () => {
    let t: TestApp;
    let port: number;
    let tokens: Record<string, string> = {};
    let lock: pg.Client;

    beforeAll(async () => {
      ({ t, port, tokens } = await startApp("postgres"));
      if (t.services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
      lock = new pg.Client({ connectionString: t.services.db.connectionString });
      await lock.connect();
    }, 60_000);
    afterAll(async () => {
      await lock?.end();
      await t?.close();
    });

    /**
     * Tenant A's first large body (anna's), its turn taken and its statement held behind the table
     * lock the test holds: answered once the lock goes.
     */
    const takeTurn = async () => {
      const first = rawPost(
        port,
        graphqlBody(BODY_BYTES * 4, '{ CUST(source: "anag-1", limit: 1) { data { CUST_ID } } }'),
        { token: tokens.anna! },
      );
      await eventually(async () => (await heavyGauge(t, "running")) === 1, { what: "A's first large body" });
      return first;
    };

    it("a tenant's second large body waits for its first; its third is refused; others go on", async () => {
      const large = graphqlBody(BODY_BYTES * 4);
      await lock.query("BEGIN");
      await lock.query('LOCK TABLE "TB_ANAG_CUST00" IN ACCESS EXCLUSIVE MODE');
      try {
        // Tenant A's first large body: received, its turn taken, its statement held by the lock.
        const first = await takeTurn();
        // Its second waits in the lane, its body received.
        const second = rawPost(port, large, { token: tokens.marco! });
        await eventually(async () => (await heavyGauge(t, "waiting")) === 1, { what: "A's second waiting" });
        // Its third: past TENANT_HEAVY_WAITING, refused.
        expect(await rawPost(port, large, { token: tokens.anna! }).status).toBe(429);

        // Meanwhile: tenant A's small request and tenant B's large one are answered.
        expect(await rawPost(port, graphqlBody(BODY_BYTES / 2), { token: tokens.anna! }).status).toBe(200);
        expect(await rawPost(port, large, { token: tokens.greta! }).status).toBe(200);
        expect(first.answered() || second.answered()).toBe(false);

        // The lock goes: both of tenant A's large requests are answered, in turn; the lane empties.
        await lock.query("ROLLBACK");
        expect(await first.status).toBe(200);
        expect(await second.status).toBe(200);
        await eventually(
          async () => (await heavyGauge(t, "running")) === 0 && (await heavyGauge(t, "waiting")) === 0,
        );
      } finally {
        await lock.query("ROLLBACK");
      }
    });

    it("a client that goes away while its body waits for a turn leaves the queue", async () => {
      await lock.query("BEGIN");
      await lock.query('LOCK TABLE "TB_ANAG_CUST00" IN ACCESS EXCLUSIVE MODE');
      try {
        const first = await takeTurn();
        const socket = net.connect(port, "127.0.0.1");
        const large = graphqlBody(BODY_BYTES * 4);
        socket.write(
          `POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${large.length}\r\nAuthorization: Bearer ${tokens.anna}\r\n\r\n${large}`,
        );
        await eventually(async () => (await heavyGauge(t, "waiting")) === 1, { what: "the second waiting" });
        socket.destroy();
        await eventually(async () => (await heavyGauge(t, "waiting")) === 0, { what: "the queue to empty" });
        await lock.query("ROLLBACK");
        expect(await first.status).toBe(200);
      } finally {
        await lock.query("ROLLBACK");
      }
    });
  });

describe("isLargeBody", () => {
  const request = (headers: Record<string, string>) => ({ headers }) as unknown as FastifyRequest;
  it("announced lengths from the bound, unknown lengths, never multipart uploads", () => {
    expect(isLargeBody(request({ "content-length": "4095" }), 4096)).toBe(false);
    expect(isLargeBody(request({ "content-length": "4096" }), 4096)).toBe(true);
    expect(isLargeBody(request({ "transfer-encoding": "chunked" }), 4096)).toBe(true);
    expect(isLargeBody(request({}), 4096)).toBe(false);
    expect(
      isLargeBody(
        request({ "content-type": "multipart/form-data; boundary=x", "content-length": "9999999" }),
        4096,
      ),
    ).toBe(false);
    expect(isLargeBody(request({ "content-length": "9999999" }), 0)).toBe(false);
  });
});
