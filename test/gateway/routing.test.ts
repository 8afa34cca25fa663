// The gateway (decisions.md §9, issue 13) in front of backends that are real HTTP servers on
// loopback reporting what reached them: method routing, auth paths, canary, developer (development
// only) and microservice routing, the secret and X-Request-ID passed on, bodies streamed both ways,
// 502 for a stopped backend, 504 for one that hangs (an import waits as long as the write backend
// may take for it), `Expect: 100-continue` forwarded without the header, WebSocket upgrades on the
// GraphQL paths piped to the write backend byte for byte (any other upgrade served as a plain
// request), rate limits shared by two gateways through Redis; a GraphQL POST running a query goes
// to read, anything else (or uncertain) to write, its bytes forwarded as received; a metadata write
// that may build indexes waits as long as the backend may take for its builds.
import { createHash } from "node:crypto";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { GRAPHQL_PATHS as SERVED_GRAPHQL_PATHS } from "../../src/graphql/plugin.ts";
import { backendTimeoutMs, chooseBackend, GRAPHQL_PATHS, isGraphQLPath } from "../../src/gateway/routing.ts";
import { buildGateway } from "../../src/gateway/server.ts";
import { createLogger } from "../../src/logger.ts";
import { TEST_REDIS_URL } from "../helpers/env.ts";

interface Seen {
  backend: string;
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  bodySha: string;
  bodyBytes: number;
}

/** What every gateway of these tests is set up with: the shared secret, quiet, no rate limits. */
const GATEWAY_ENV = {
  ROLE: "gateway",
  GATEWAY_SECRET: "shared-secret",
  LOG_LEVEL: "silent",
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: "0",
  RATE_LIMIT_USER_PER_SECOND: "0",
  RATE_LIMIT_USER_PER_MINUTE: "0",
  RATE_LIMIT_USER_PER_HOUR: "0",
};

/** A gateway of `env` listening on loopback, pushed to `open` to be closed after the tests. */
async function listeningGateway(env: Record<string, string>, open: FastifyInstance[]) {
  const gw = await buildGateway(loadConfig(env), createLogger("silent"));
  open.push(gw);
  await gw.listen({ host: "127.0.0.1", port: 0 });
  return { gw, base: `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}` };
}

/** A backend that answers with what it received; `hang` never answers. */
async function backend(name: string, opts: { hang?: boolean } = {}) {
  const seen: Seen[] = [];
  const server = http.createServer((req, res) => {
    const hash = createHash("sha256");
    let bytes = 0;
    req.on("data", (c: Buffer) => {
      hash.update(c);
      bytes += c.length;
    });
    req.on("end", () => {
      const s: Seen = {
        backend: name,
        method: req.method!,
        url: req.url!,
        headers: req.headers,
        bodySha: hash.digest("hex"),
        bodyBytes: bytes,
      };
      seen.push(s);
      if (opts.hang) return;
      if (req.url?.startsWith("/big")) {
        // A download of 8 MB streamed in 64 KB chunks.
        res.writeHead(200, {
          "content-type": "application/octet-stream",
          "content-length": String(8 * 1024 * 1024),
        });
        const chunk = Buffer.alloc(64 * 1024, 7);
        let left = 128;
        const write = () => {
          while (left > 0) {
            left--;
            if (!res.write(chunk)) return void res.once("drain", write);
          }
          res.end();
        };
        write();
        return;
      }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(s));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    seen,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

type Backend = Awaited<ReturnType<typeof backend>>;

/**
 * A backend taking WebSocket upgrades: it records the upgrade request, answers 101 and echoes
 * every byte; `refuse` answers 401 in a JSON body instead, `hang` never answers.
 */
async function upgradeBackend(opts: { refuse?: boolean; hang?: boolean } = {}) {
  const upgrades: http.IncomingHttpHeaders[] = [];
  const sockets = new Set<net.Socket>();
  const server = http.createServer((_req, res) => res.writeHead(200).end("plain"));
  server.on("upgrade", (req: http.IncomingMessage, socket: net.Socket) => {
    upgrades.push({ ...req.headers, ":path": req.url });
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    // Node's server keeps a socket half open once its client ended it: closed here.
    socket.on("end", () => socket.end());
    if (opts.hang) return;
    if (opts.refuse) {
      const body = JSON.stringify({ errors: [{ message: "no", extensions: { code: "TOKEN_MISSING" } }] });
      socket.end(
        `HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`,
      );
      return;
    }
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: abc\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n",
    );
    socket.pipe(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    upgrades,
    sockets,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

/** A raw connection that sent `request`: its answer's head (status line and headers) once complete. */
function rawRequest(base: string, request: string) {
  const { hostname, port } = new URL(base);
  const socket = net.connect(Number(port), hostname);
  socket.write(request);
  let buffered = Buffer.alloc(0);
  const head = new Promise<{ status: number; headers: Record<string, string>; rest: Buffer }>(
    (resolve, reject) => {
      const onData = (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        const end = buffered.indexOf("\r\n\r\n");
        if (end === -1) return;
        socket.off("data", onData);
        const [statusLine, ...lines] = buffered.subarray(0, end).toString("latin1").split("\r\n");
        const headers: Record<string, string> = {};
        for (const line of lines) {
          const i = line.indexOf(":");
          headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
        }
        resolve({ status: Number(statusLine!.split(" ")[1]), headers, rest: buffered.subarray(end + 4) });
      };
      socket.on("data", onData);
      socket.once("error", reject);
      socket.once("close", () => reject(new Error(`closed before an answer: ${buffered.toString()}`)));
    },
  );
  /** Reads `n` bytes after the head (those read with it first). */
  const read = async (n: number) => {
    const { rest } = await head;
    let got = rest;
    while (got.length < n) {
      const chunk = await new Promise<Buffer>((resolve, reject) => {
        socket.once("data", resolve);
        socket.once("close", () => reject(new Error("closed")));
      });
      got = Buffer.concat([got, chunk]);
    }
    return got.subarray(0, n);
  };
  let received = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
  });
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  /** Everything after the head, once the connection closed. */
  const rest = async () => {
    await closed;
    return received.subarray(received.indexOf("\r\n\r\n") + 4);
  };
  return { socket, head, read, closed, rest };
}

/** Resolves once the set is empty (its sockets remove themselves on close). */
async function eventuallyEmpty(set: Set<net.Socket>) {
  await Promise.all([...set].map((s) => new Promise((resolve) => s.once("close", resolve))));
}

const wsUpgrade = (path: string, extra = "") =>
  `GET ${path} HTTP/1.1\r\nHost: gateway.example\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n${extra}\r\n`;

describe("gateway routing and failures", () => {
  const b: Record<string, Backend> = {};
  let gateway: FastifyInstance;
  let devGateway: FastifyInstance;
  let base: string;
  const env = () => ({
    ...GATEWAY_ENV,
    READ_BACKEND_URL: b.read!.url,
    WRITE_BACKEND_URL: b.write!.url,
    AUTH_BACKEND_URL: b.auth!.url,
    CANARY_READ_URL: b.canaryRead!.url,
    CANARY_WRITE_URL: b.canaryWrite!.url,
    MICROSERVICE_ROUTES: JSON.stringify({ pricing: b.pricing!.url }),
    DEVELOPER_ROUTES: JSON.stringify({ ada: b.ada!.url }),
    BACKEND_TIMEOUT_MS: "400",
  });

  beforeAll(async () => {
    for (const name of ["read", "write", "auth", "canaryRead", "canaryWrite", "pricing", "ada"])
      b[name] = await backend(name);
    b.slow = await backend("slow", { hang: true });
    gateway = await buildGateway(loadConfig(env()), createLogger("silent"));
    await gateway.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}`;
    devGateway = await buildGateway(
      loadConfig({ ...env(), NODE_ENV: "development" }),
      createLogger("silent"),
    );
    await devGateway.ready();
  });
  afterAll(async () => {
    await gateway?.close();
    await devGateway?.close();
    for (const x of Object.values(b)) await x.close();
  });

  const call = async (method: string, path: string, headers: Record<string, string> = {}, body?: string) => {
    const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
  };

  it("GET to read, writes to write, /auth and /api/v4/auth to auth; the version segment and query unchanged", async () => {
    expect((await call("GET", "/api/v4/core/CUST?source=anag-1&$num_rows=2")).body).toMatchObject({
      backend: "read",
      url: "/api/v4/core/CUST?source=anag-1&$num_rows=2",
    });
    for (const method of ["POST", "PUT", "PATCH", "DELETE"]) {
      const r = await call(
        method,
        "/api/v4/core/CUST/1?source=anag-1",
        { "content-type": "application/json" },
        "{}",
      );
      expect(r.body.backend, method).toBe("write");
    }
    expect(
      (await call("POST", "/auth/login", { "content-type": "application/json" }, "{}")).body.backend,
    ).toBe("auth");
    expect((await call("GET", "/api/v4/auth/tokenvalidator")).body.backend).toBe("auth");
    expect((await call("GET", "/api/v5/core/CUST")).body.url).toBe("/api/v5/core/CUST");
  });

  it("its /metrics answers only a scraper with the gateway's secret: the gateway faces the public network", async () => {
    const open = await fetch(`${base}/metrics`);
    expect(open.status).toBe(403);
    expect(await open.json()).toMatchObject({ code: "GATEWAY_SECRET_REQUIRED", status: 403 });
    expect((await fetch(`${base}/metrics`, { headers: { "x-gateway-secret": "wrong" } })).status).toBe(403);
    const scraped = await fetch(`${base}/metrics`, { headers: { "x-gateway-secret": "shared-secret" } });
    expect(scraped.status).toBe(200);
    expect(await scraped.text()).toContain("dimensio_http_requests_total");
  });

  it("with METRICS_TOKEN its /metrics answers the token's bearer or the secret's holder, and names both to anyone else", async () => {
    const gw = await buildGateway(
      loadConfig({ ...env(), METRICS_TOKEN: "scrape-token-0123456789" }),
      createLogger("silent"),
    );
    try {
      const scrape = (headers: Record<string, string>) =>
        gw.inject({ method: "GET", url: "/metrics", headers });
      const refused = await scrape({ authorization: "Bearer not-the-token-0123" });
      expect(refused.statusCode).toBe(403);
      expect(refused.json()).toMatchObject({
        code: "METRICS_TOKEN_REQUIRED",
        message:
          "/metrics answers a scraper that sends Authorization: Bearer <METRICS_TOKEN> (or the x-gateway-secret header): configure the scraper with it.",
      });
      expect((await scrape({ authorization: "Bearer scrape-token-0123456789" })).statusCode).toBe(200);
      expect((await scrape({ "x-gateway-secret": "shared-secret" })).statusCode).toBe(200);
    } finally {
      await gw.close();
    }
  });

  it("passes the secret and X-Request-ID on, and keeps the caller's request id end to end", async () => {
    const r = await call("GET", "/api/v4/core/CUST?source=anag-1", { "x-request-id": "trace-123" });
    expect(r.body.headers["x-gateway-secret"]).toBe("shared-secret");
    expect(r.body.headers["x-request-id"]).toBe("trace-123");
    expect(r.headers.get("x-request-id")).toBe("trace-123");
    const generated = await call("GET", "/api/v4/core/CUST?source=anag-1");
    expect(generated.body.headers["x-request-id"]).toBe(generated.headers.get("x-request-id"));
  });

  it("canary-mode: on goes to the canary backends; microservice by name; developer only in development", async () => {
    expect((await call("GET", "/api/v4/core/CUST", { "canary-mode": "on" })).body.backend).toBe("canaryRead");
    expect((await call("POST", "/api/v4/core/CUST", { "canary-mode": "on" }, "{}")).body.backend).toBe(
      "canaryWrite",
    );
    expect((await call("GET", "/api/v4/core/CUST", { "canary-mode": "off" })).body.backend).toBe("read");
    expect((await call("GET", "/api/v4/core/PRICE", { microservice: "pricing" })).body.backend).toBe(
      "pricing",
    );
    expect((await call("GET", "/api/v4/core/PRICE", { microservice: "unknown" })).body.backend).toBe("read");
    // NODE_ENV production (the default): the developer header is ignored.
    expect((await call("GET", "/api/v4/core/CUST", { developer: "ada" })).body.backend).toBe("read");
    const dev = await devGateway.inject({
      method: "GET",
      url: "/api/v4/core/CUST",
      headers: { developer: "ada" },
    });
    expect(dev.json().backend).toBe("ada");
    const config = loadConfig({ ...env(), NODE_ENV: "development" });
    expect(chooseBackend(config, "GET", "/api/v4/core/X", { developer: "ada" }).name).toBe("developer:ada");
  });

  it("streams bodies both ways: an 8 MB upload arrives byte for byte, an 8 MB download comes back whole", async () => {
    const payload = Buffer.alloc(8 * 1024 * 1024, 3);
    const up = await call(
      "POST",
      "/api/v4/media/upload",
      { "content-type": "multipart/form-data; boundary=x" },
      payload.toString("latin1"),
    );
    expect(up.body.bodyBytes).toBe(payload.length);
    expect(up.body.bodySha).toBe(createHash("sha256").update(payload).digest("hex"));
    const down = await fetch(`${base}/big`);
    expect(Buffer.from(await down.arrayBuffer()).length).toBe(8 * 1024 * 1024);
  });

  it("a stopped backend is 502 BACKEND_UNAVAILABLE within a second; a hanging one 504 BACKEND_TIMEOUT at the timeout", async () => {
    const stopped = await backend("gone");
    await stopped.close();
    const config = loadConfig({ ...env(), READ_BACKEND_URL: stopped.url, WRITE_BACKEND_URL: b.slow!.url });
    const gw = await buildGateway(config, createLogger("silent"));
    try {
      const t0 = Date.now();
      const down = await gw.inject({ method: "GET", url: "/api/v4/core/CUST?source=anag-1" });
      expect(Date.now() - t0).toBeLessThan(1000);
      expect(down.statusCode).toBe(502);
      expect(down.json()).toMatchObject({ code: "BACKEND_UNAVAILABLE", status: 502, error: "BadGateway" });
      const t1 = Date.now();
      const hung = await gw.inject({ method: "POST", url: "/api/v4/core/CUST", payload: {} });
      expect(hung.statusCode).toBe(504);
      expect(hung.json()).toMatchObject({ code: "BACKEND_TIMEOUT", status: 504 });
      expect(Date.now() - t1).toBeGreaterThanOrEqual(350);
    } finally {
      await gw.close();
    }
  });
});

describe("gateway: Expect, import timeouts and upgrades", () => {
  let read: Backend;
  let write: Backend;
  let hanging: Backend;
  let sockets: Awaited<ReturnType<typeof upgradeBackend>>;
  let canary: Awaited<ReturnType<typeof upgradeBackend>>;
  const open: FastifyInstance[] = [];
  const env = (more: Record<string, string> = {}) => ({
    ...GATEWAY_ENV,
    READ_BACKEND_URL: read.url,
    WRITE_BACKEND_URL: write.url,
    AUTH_BACKEND_URL: read.url,
    ...more,
  });
  /** A gateway listening on loopback, closed after the tests; its base URL. */
  const start = (more: Record<string, string> = {}) => listeningGateway(env(more), open);

  beforeAll(async () => {
    read = await backend("read");
    write = await backend("write");
    hanging = await backend("hanging", { hang: true });
    sockets = await upgradeBackend();
    canary = await upgradeBackend();
  });
  afterAll(async () => {
    for (const gw of open) await gw.close();
    for (const x of [read, write, hanging, sockets, canary]) await x?.close();
  });

  it("a body sent with Expect: 100-continue is forwarded (the client got 100 Continue) without the header", async () => {
    const { base } = await start();
    const payload = Buffer.alloc(2 * 1024 * 1024, 5);
    const { hostname, port } = new URL(base);
    const answer = await new Promise<{ status: number; continued: boolean; body: Seen }>(
      (resolve, reject) => {
        let continued = false;
        const req = http.request({
          hostname,
          port,
          method: "POST",
          path: "/api/v4/core/CUST/import?source=anag-1",
          headers: { "content-type": "text/csv", "content-length": payload.length, expect: "100-continue" },
        });
        req.on("continue", () => {
          continued = true;
          req.end(payload);
        });
        req.on("response", (res) => {
          let text = "";
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () => resolve({ status: res.statusCode!, continued, body: JSON.parse(text) }));
        });
        req.on("error", reject);
      },
    );
    expect(answer.status).toBe(200);
    expect(answer.continued).toBe(true);
    expect(answer.body.backend).toBe("write");
    expect(answer.body.bodyBytes).toBe(payload.length);
    expect(answer.body.bodySha).toBe(createHash("sha256").update(payload).digest("hex"));
    expect(answer.body.headers.expect).toBeUndefined();
  });

  it("an import waits REQUEST_TIMEOUT_MS + IMPORT_WRITE_TIMEOUT_MS + STATEMENT_TIMEOUT_MS + BACKEND_TIMEOUT_MS; other writes BACKEND_TIMEOUT_MS", async () => {
    const timeouts = {
      BACKEND_TIMEOUT_MS: "300",
      REQUEST_TIMEOUT_MS: "200",
      IMPORT_WRITE_TIMEOUT_MS: "400",
      STATEMENT_TIMEOUT_MS: "200",
    };
    const config = loadConfig(env(timeouts));
    expect(backendTimeoutMs(config, "POST", "/api/v4/core/CUST/import?source=anag-1&mode=create")).toBe(1100);
    expect(backendTimeoutMs(config, "POST", "/api/v4/core/CUST/import/")).toBe(1100);
    expect(backendTimeoutMs(config, "POST", "/api/v4/core/CUST?source=anag-1")).toBe(300);
    expect(backendTimeoutMs(config, "POST", "/api/v4/core/import/x")).toBe(300);
    expect(backendTimeoutMs(config, "GET", "/api/v4/core/CUST/import")).toBe(300);
    // The defaults: 30 s + 600 s + 30 s + 30 s.
    expect(
      backendTimeoutMs(
        loadConfig({ ...env(), BACKEND_TIMEOUT_MS: "" }),
        "POST",
        "/api/v4/core/CUST/import?source=anag-1",
      ),
    ).toBe(690_000);

    const { gw } = await start({ ...timeouts, WRITE_BACKEND_URL: hanging.url });
    const t0 = performance.now();
    const plain = await gw.inject({ method: "POST", url: "/api/v4/core/CUST?source=anag-1", payload: {} });
    const plainMs = performance.now() - t0;
    expect(plain.statusCode).toBe(504);
    expect(plain.json().message).toMatch(/may still complete/);
    const t1 = performance.now();
    const imported = await gw.inject({
      method: "POST",
      url: "/api/v4/core/CUST/import?source=anag-1",
      headers: { "content-type": "text/csv" },
      payload: "NAME\nA\n",
    });
    const importMs = performance.now() - t1;
    expect(imported.statusCode).toBe(504);
    expect(imported.json()).toMatchObject({ code: "BACKEND_TIMEOUT" });
    expect(plainMs).toBeLessThan(1000);
    expect(importMs).toBeGreaterThanOrEqual(1050);
  });

  it("the gateway proxies WebSocket upgrades on the paths the service serves GraphQL on", () => {
    expect([...GRAPHQL_PATHS].sort()).toEqual([...SERVED_GRAPHQL_PATHS].sort());
  });

  it("a WebSocket upgrade on /graphql goes to the write backend with the secret, and is piped byte for byte", async () => {
    const { base } = await start({ WRITE_BACKEND_URL: sockets.url, CANARY_WRITE_URL: canary.url });
    const conn = rawRequest(
      base,
      wsUpgrade(
        "/graphql?x=1",
        "x-request-id: ws-trace-1\r\nx-gateway-secret: forged\r\nx-forwarded-for: 6.6.6.6\r\n",
      ),
    );
    const head = await conn.head;
    expect(head.status).toBe(101);
    expect(head.headers["sec-websocket-accept"]).toBe("abc");
    expect(head.headers["sec-websocket-protocol"]).toBe("graphql-transport-ws");
    expect(head.headers["x-request-id"]).toBe("ws-trace-1");
    const seen = sockets.upgrades.at(-1)!;
    expect(seen).toMatchObject({
      ":path": "/graphql?x=1",
      upgrade: "websocket",
      "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
      "sec-websocket-protocol": "graphql-transport-ws",
      "x-gateway-secret": "shared-secret",
      "x-request-id": "ws-trace-1",
      "x-forwarded-for": "127.0.0.1",
      host: new URL(sockets.url).host,
    });
    // Every byte value, both ways, in pieces larger than a socket's read.
    const bytes = Buffer.alloc(256 * 1024);
    for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) % 256;
    conn.socket.write(bytes);
    expect((await conn.read(bytes.length)).equals(bytes)).toBe(true);
    conn.socket.destroy();

    // /api/v4/graphql too; canary-mode: on to the canary write backend.
    const viaCanary = rawRequest(base, wsUpgrade("/api/v4/graphql", "canary-mode: on\r\n"));
    expect((await viaCanary.head).status).toBe(101);
    expect(canary.upgrades).toHaveLength(1);
    viaCanary.socket.destroy();
  });

  it("a backend's refusal of the upgrade is relayed; a backend down is 502 BACKEND_UNAVAILABLE, one silent 504 BACKEND_TIMEOUT", async () => {
    const refusing = await upgradeBackend({ refuse: true });
    const down = await upgradeBackend();
    await down.close();
    try {
      const { base } = await start({ WRITE_BACKEND_URL: refusing.url });
      const refused = rawRequest(base, wsUpgrade("/graphql"));
      const head = await refused.head;
      expect(head.status).toBe(401);
      expect(JSON.parse((await refused.rest()).toString())).toMatchObject({
        errors: [{ extensions: { code: "TOKEN_MISSING" } }],
      });
      const gone = await start({ WRITE_BACKEND_URL: down.url });
      const failed = rawRequest(gone.base, wsUpgrade("/graphql"));
      expect((await failed.head).status).toBe(502);
      expect(JSON.parse((await failed.rest()).toString())).toMatchObject({
        code: "BACKEND_UNAVAILABLE",
        status: 502,
      });
      const hanging = await upgradeBackend({ hang: true });
      try {
        const slow = await start({ WRITE_BACKEND_URL: hanging.url, BACKEND_TIMEOUT_MS: "300" });
        const t0 = performance.now();
        const timedOut = rawRequest(slow.base, wsUpgrade("/graphql"));
        expect((await timedOut.head).status).toBe(504);
        expect(performance.now() - t0).toBeGreaterThanOrEqual(250);
        expect(JSON.parse((await timedOut.rest()).toString())).toMatchObject({ code: "BACKEND_TIMEOUT" });
        // The backend's half is closed too.
        await eventuallyEmpty(hanging.sockets);
      } finally {
        await hanging.close();
      }
    } finally {
      await refusing.close();
    }
  });

  it("any other upgrade (h2c, a WebSocket elsewhere) is served as a plain request, forwarded without it", async () => {
    const { base } = await start({ WRITE_BACKEND_URL: sockets.url });
    const before = sockets.upgrades.length;
    // Node's client sends the headers as given and takes a non-101 answer as a response.
    const h2c = await new Promise<{ status: number; body: Seen }>((resolve, reject) => {
      const req = http.get(`${base}/api/v4/core/CUST?source=anag-1`, {
        headers: {
          connection: "Upgrade, HTTP2-Settings",
          upgrade: "h2c",
          "http2-settings": "AAMAAABkAARAAAAAAAIAAAAA",
        },
      });
      req.on("response", (res) => {
        let text = "";
        res.on("data", (c) => {
          text += c;
        });
        res.on("end", () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      });
      req.on("upgrade", () => reject(new Error("upgraded")));
      req.on("error", reject);
    });
    expect(h2c.status).toBe(200);
    expect(h2c.body).toMatchObject({ backend: "read", url: "/api/v4/core/CUST?source=anag-1" });
    expect(h2c.body.headers.upgrade).toBeUndefined();
    expect(h2c.body.headers["http2-settings"]).toBeUndefined();
    // A WebSocket upgrade on another path is a plain GET too.
    const elsewhere = rawRequest(base, wsUpgrade("/api/v4/core/CUST"));
    expect((await elsewhere.head).status).toBe(200);
    elsewhere.socket.destroy();
    expect(sockets.upgrades).toHaveLength(before);
  });

  it("an upgrade spends the gateway's rate limits as a request does: past them 429 in the standard body", async () => {
    const { base } = await start({ WRITE_BACKEND_URL: sockets.url, RATE_LIMIT_ANONYMOUS_PER_MINUTE: "1" });
    const first = rawRequest(base, wsUpgrade("/graphql"));
    expect((await first.head).status).toBe(101);
    first.socket.destroy();
    const second = rawRequest(base, wsUpgrade("/graphql"));
    const head = await second.head;
    expect(head.status).toBe(429);
    expect(Number(head.headers["retry-after"])).toBeGreaterThan(0);
    expect(JSON.parse((await second.rest()).toString())).toMatchObject({
      code: "RATE_LIMIT_EXCEEDED",
      status: 429,
    });
  });

  it("a gateway that closes cuts its open sockets instead of waiting for their clients", async () => {
    const { gw, base } = await start({ WRITE_BACKEND_URL: sockets.url });
    const conn = rawRequest(base, wsUpgrade("/graphql"));
    expect((await conn.head).status).toBe(101);
    await gw.close();
    await conn.closed;
  });
});

describe("gateway: a GraphQL POST running a query goes to read, anything else to write", () => {
  const b: Record<string, Backend> = {};
  const open: FastifyInstance[] = [];
  let dir: string;
  const env = (more: Record<string, string> = {}) => ({
    ...GATEWAY_ENV,
    READ_BACKEND_URL: b.read!.url,
    WRITE_BACKEND_URL: b.write!.url,
    AUTH_BACKEND_URL: b.auth!.url,
    CANARY_READ_URL: b.canaryRead!.url,
    CANARY_WRITE_URL: b.canaryWrite!.url,
    MICROSERVICE_ROUTES: JSON.stringify({ pricing: b.pricing!.url }),
    ...more,
  });
  const start = async (more: Record<string, string> = {}) => (await listeningGateway(env(more), open)).base;
  let base: string;

  beforeAll(async () => {
    for (const name of ["read", "write", "auth", "canaryRead", "canaryWrite", "pricing"])
      b[name] = await backend(name);
    dir = await mkdtemp(path.join(tmpdir(), "dimensio-gw-"));
    base = await start();
  });
  afterAll(async () => {
    for (const gw of open) await gw.close();
    for (const x of Object.values(b)) await x.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  const sha = (bytes: Buffer | string) => createHash("sha256").update(bytes).digest("hex");
  /** POSTs `body` (bytes as given) to the gateway: the backend that got it and what it saw. */
  const post = async (
    body: string | Buffer,
    {
      path: at = "/graphql",
      headers = {},
      at: gateway = base,
    }: { path?: string; headers?: Record<string, string>; at?: string } = {},
  ) => {
    const res = await fetch(`${gateway}${at}`, {
      method: "POST",
      headers: { "content-type": "application/json", ...headers },
      body: typeof body === "string" ? body : new Uint8Array(body),
    });
    expect(res.status).toBe(200);
    return (await res.json()) as Seen;
  };
  const gql = (request: unknown, opts?: Parameters<typeof post>[1]) => post(JSON.stringify(request), opts);

  it("a query goes to read with its bytes, Content-Type and Content-Length as sent; on every GraphQL path", async () => {
    // Whitespace, member order and escapes that a re-serialised body would change.
    const body = Buffer.from(
      '{ "variables" : {"x":"\\u00e9"},\n  "query": "query Q($x: String) { a(x: $x) }" ,"operationName":"Q"}',
    );
    const seen = await post(body, { headers: { "content-type": "application/json; charset=utf-8" } });
    expect(seen).toMatchObject({ backend: "read", method: "POST", url: "/graphql", bodyBytes: body.length });
    expect(seen.bodySha).toBe(sha(body));
    expect(seen.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(seen.headers["content-length"]).toBe(String(body.length));
    expect(seen.headers["x-gateway-secret"]).toBe("shared-secret");
    for (const at of ["/api/v4/graphql", "/graphql/", "/graphql?trace=1"])
      expect((await gql({ query: "{ a }" }, { path: at })).backend, at).toBe("read");
    expect(isGraphQLPath("/api/v4/graphql/?x")).toBe(true);
    expect(isGraphQLPath("/graphqlx")).toBe(false);
    expect((await gql({ query: "{ a }" }, { path: "/api/v4/core/CUST" })).backend).toBe("write");
  });

  it("mutations and subscriptions go to write; operationName picks the operation that runs", async () => {
    expect((await gql({ query: "mutation { a }" })).backend).toBe("write");
    expect((await gql({ query: "subscription { a }" })).backend).toBe("write");
    const both = "query Q { a } mutation M { b }";
    expect((await gql({ query: both, operationName: "Q" })).backend).toBe("read");
    expect((await gql({ query: both, operationName: "M" })).backend).toBe("write");
    // Which one runs is the backend's question (it answers an error): write answers it.
    expect((await gql({ query: both })).backend).toBe("write");
    expect((await gql({ query: "query Q { a } query R { b }" })).backend).toBe("write");
    expect((await gql({ query: "query Q { a } query R { b }", operationName: "R" })).backend).toBe("read");
    expect((await gql({ query: "query Q { a }", operationName: "Nope" })).backend).toBe("write");
    expect((await gql({ query: "fragment F on Query { a }" })).backend).toBe("write");
  });

  it("what is uncertain goes to write, bytes unchanged: not JSON, not UTF-8, an array, a syntax error, another media type", async () => {
    const cases: Array<[string, string | Buffer, Record<string, string>?]> = [
      ["not JSON", "{ query: {a} }"],
      [
        "not UTF-8",
        Buffer.concat([Buffer.from('{"query":"{ a(x: \\"'), Buffer.from([0xff]), Buffer.from('\\") }"}')]),
      ],
      ["a batch", JSON.stringify([{ query: "{ a }" }, { query: "{ b }" }])],
      ["a syntax error", JSON.stringify({ query: "{ a " })],
      ["no query", JSON.stringify({ variables: {} })],
      ["a query that is not text", JSON.stringify({ query: 1 })],
      ["an operationName that is not text", JSON.stringify({ query: "{ a }", operationName: 1 })],
      ["application/graphql", "{ a }", { "content-type": "application/graphql" }],
      ["compressed", JSON.stringify({ query: "{ a }" }), { "content-encoding": "gzip" }],
      ["text/plain", JSON.stringify({ query: "{ a }" }), { "content-type": "text/plain" }],
    ];
    for (const [name, body, headers] of cases) {
      const seen = await post(body, { headers: headers ?? {} });
      expect(seen.backend, name).toBe("write");
      expect(seen.bodySha, name).toBe(sha(body));
    }
  });

  it("a body past the backends' bound for GraphQL (or a document past GRAPHQL_MAX_DOCUMENT_BYTES) goes to write unread, whole", async () => {
    const small = await start({ BODY_LIMIT_BYTES: "4096", GRAPHQL_MAX_DOCUMENT_BYTES: "1024" });
    const big = JSON.stringify({
      query: "query ($v: String) { a(x: $v) }",
      variables: { v: "x".repeat(5000) },
    });
    const seen = await post(big, { at: small });
    expect(seen).toMatchObject({ backend: "write", bodyBytes: big.length, bodySha: sha(big) });
    // Under the bound: read.
    expect(
      (await gql({ query: "query ($v: String) { a(x: $v) }", variables: { v: "x" } }, { at: small })).backend,
    ).toBe("read");
    const longDocument = JSON.stringify({ query: `{ ${"a ".repeat(600)}}` });
    expect((await post(longDocument, { at: small })).backend).toBe("write");
    expect((await post(longDocument)).backend).toBe("read");

    // Sent in chunks without Content-Length: read up to the bound, then the rest streamed after it.
    const chunked = async (chunks: string[]) => {
      const { hostname, port } = new URL(small);
      return new Promise<Seen>((resolve, reject) => {
        const req = http.request({
          hostname,
          port,
          method: "POST",
          path: "/graphql",
          headers: { "content-type": "application/json", "transfer-encoding": "chunked" },
        });
        req.on("response", (res) => {
          let text = "";
          res.on("data", (c) => {
            text += c;
          });
          res.on("end", () => resolve(JSON.parse(text)));
        });
        req.on("error", reject);
        for (const c of chunks) req.write(c);
        req.end();
      });
    };
    const bigChunks = [big.slice(0, 3000), big.slice(3000, 4500), big.slice(4500)];
    expect(await chunked(bigChunks)).toMatchObject({
      backend: "write",
      bodyBytes: big.length,
      bodySha: sha(big),
    });
    const query = JSON.stringify({ query: "{ a b c }" });
    expect(await chunked([query.slice(0, 5), query.slice(5)])).toMatchObject({
      backend: "read",
      bodySha: sha(query),
    });
  });

  it("canary-mode: on sends a query to the canary read backend, a mutation to the canary write one; a microservice gets both", async () => {
    const canary = { "canary-mode": "on" };
    expect((await gql({ query: "{ a }" }, { headers: canary })).backend).toBe("canaryRead");
    expect((await gql({ query: "mutation { a }" }, { headers: canary })).backend).toBe("canaryWrite");
    expect((await gql({ query: "{ a }" }, { headers: { microservice: "pricing" } })).backend).toBe("pricing");
    expect((await gql({ query: "mutation { a }" }, { headers: { microservice: "pricing" } })).backend).toBe(
      "pricing",
    );
  });

  it("a persisted operation's hash alone goes to read once the gateway saw its query with it; otherwise to write", async () => {
    const persisted = (document: string, hash = sha(document)) => ({
      persistedQuery: { version: 1, sha256Hash: hash },
    });
    const query = `query Learned${Date.now()} { a }`;
    const hashOnly = { extensions: persisted(query) };
    // Unknown: write (which answers PERSISTED_QUERY_NOT_FOUND, and the client sends the text).
    expect((await gql(hashOnly)).backend).toBe("write");
    expect((await gql({ query: "", ...hashOnly })).backend).toBe("write");
    expect((await gql({ query, extensions: persisted(query) })).backend).toBe("read");
    expect((await gql(hashOnly)).backend).toBe("read");
    expect((await gql({ query: "", ...hashOnly })).backend).toBe("read");
    expect(
      (await gql({ extensions: { persistedQuery: { version: 1, sha256Hash: `sha256:${sha(query)}` } } }))
        .backend,
    ).toBe("read");
    // A mutation's hash is never learnt; nor a hash that is not its text's (the backend's 400).
    const mutation = `mutation Learned${Date.now()} { a }`;
    expect((await gql({ query: mutation, extensions: persisted(mutation) })).backend).toBe("write");
    expect((await gql({ extensions: persisted(mutation) })).backend).toBe("write");
    const other = `query Other${Date.now()} { a }`;
    const forged = sha(`mutation Forged${Date.now()} { a }`);
    expect((await gql({ query: other, extensions: persisted(other, forged) })).backend).toBe("read");
    expect((await gql({ extensions: persisted(other, forged) })).backend).toBe("write");
    // A gateway knows only what it saw.
    const fresh = await start();
    expect((await gql(hashOnly, { at: fresh })).backend).toBe("write");
  });

  it("a hash sent as `documentId` routes as the persistedQuery hash does; a malformed or conflicting one goes to write", async () => {
    const query = `query LearnedById${Date.now()} { a }`;
    const documentId = `sha256:${sha(query)}`;
    expect((await gql({ documentId })).backend).toBe("write");
    // Learnt from its text sent with the documentId, then known by either spelling.
    expect((await gql({ query, documentId })).backend).toBe("read");
    expect((await gql({ documentId })).backend).toBe("read");
    expect((await gql({ query: "", documentId: sha(query) })).backend).toBe("read");
    expect(
      (await gql({ extensions: { persistedQuery: { version: 1, sha256Hash: sha(query) } } })).backend,
    ).toBe("read");
    // The backend refuses these (PERSISTED_QUERY_INVALID): write answers them.
    expect((await gql({ documentId: "sha1:abc" })).backend).toBe("write");
    const other = sha(`query OtherById${Date.now()} { a }`);
    expect(
      (await gql({ documentId, extensions: { persistedQuery: { version: 1, sha256Hash: other } } })).backend,
    ).toBe("write");
  });

  it("a trusted document's hash alone (GRAPHQL_TRUSTED_DOCUMENTS) goes where its operation runs", async () => {
    const query = "query Trusted { a }";
    const mutation = "mutation TrustedWrite { a }";
    const file = path.join(dir, "persisted-documents.json");
    await writeFile(file, JSON.stringify({ [`sha256:${sha(query)}`]: query, [sha(mutation)]: mutation }));
    const trusted = await start({ GRAPHQL_TRUSTED_DOCUMENTS: file, GRAPHQL_TRUSTED_ONLY: "true" });
    const byHash = (document: string) => ({
      extensions: { persistedQuery: { version: 1, sha256Hash: sha(document) } },
    });
    expect((await gql(byHash(query), { at: trusted })).backend).toBe("read");
    expect((await gql(byHash(mutation), { at: trusted })).backend).toBe("write");
    expect((await gql(byHash("query Unknown { a }"), { at: trusted })).backend).toBe("write");
  });

  it("a 504 of a query sent by POST says nothing of a request that may still complete", async () => {
    const hanging = await backend("hanging", { hang: true });
    try {
      const slow = await start({ READ_BACKEND_URL: hanging.url, BACKEND_TIMEOUT_MS: "200" });
      const res = await fetch(`${slow}/graphql`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ query: "{ a }" }),
      });
      expect(res.status).toBe(504);
      const body = (await res.json()) as { code: string; message: string };
      expect(body).toMatchObject({
        code: "BACKEND_TIMEOUT",
        message: "The read backend did not answer in time.",
      });
      expect(hanging.seen).toHaveLength(1);
    } finally {
      await hanging.close();
    }
  });
});

/**
 * A backend that holds every answer until the test releases it (200 with what it received), or
 * drops it: answers come when the test says, not after a delay.
 */
async function heldBackend() {
  const held: Array<{ url: string; res: http.ServerResponse }> = [];
  const arrived: Array<() => void> = [];
  const server = http.createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      held.push({ url: req.url!, res });
      for (const wake of arrived.splice(0)) wake();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** Resolves once a request for `url` is held. */
    async waitFor(url: string) {
      while (!held.some((h) => h.url === url)) await new Promise<void>((resolve) => arrived.push(resolve));
    },
    release(url: string) {
      const h = held.find((x) => x.url === url)!;
      h.res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ released: url }));
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

describe("gateway: metadata writes that may build indexes wait for the backend's index builds", () => {
  const open: FastifyInstance[] = [];
  const backends: Array<{ close: () => Promise<void> }> = [];
  const env = (writeUrl: string, more: Record<string, string> = {}) => ({
    ...GATEWAY_ENV,
    READ_BACKEND_URL: writeUrl,
    WRITE_BACKEND_URL: writeUrl,
    AUTH_BACKEND_URL: writeUrl,
    ...more,
  });
  const start = async (writeUrl: string, more: Record<string, string> = {}) => {
    const gw = await buildGateway(loadConfig(env(writeUrl, more)), createLogger("silent"));
    open.push(gw);
    return gw;
  };
  afterAll(async () => {
    for (const gw of open) await gw.close();
    for (const x of backends) await x.close();
  });

  const timeouts = {
    BACKEND_TIMEOUT_MS: "300",
    REQUEST_TIMEOUT_MS: "200",
    STATEMENT_TIMEOUT_MS: "200",
    INDEX_BUILD_TIMEOUT_MS: "2000",
    IMPORT_WRITE_TIMEOUT_MS: "400",
  };

  it("DIM, VAR and OBJECT writes wait REQUEST + STATEMENT + INDEX_BUILD + BACKEND timeouts; other metadata and reads BACKEND_TIMEOUT_MS", () => {
    const config = loadConfig(env("http://127.0.0.1:1", timeouts));
    const indexing = [
      ["POST", "/api/v4/core/DIM"],
      ["POST", "/api/v4/core/DIM/"],
      ["PATCH", "/api/v4/core/DIM/CUST"],
      ["PUT", "/api/v4/core/DIM/CUST?x=1"],
      ["DELETE", "/api/v4/core/DIM/CUST"],
      ["POST", "/api/v4/core/VAR"],
      ["PATCH", "/api/v4/core/VAR/CUST/NAME"],
      ["DELETE", "/api/v4/core/VAR/CUST/NAME"],
      ["POST", "/api/v4/core/OBJECT?source=x"],
      ["PUT", "/api/v4/core/OBJECT/CUST/CITY_ID"],
      ["DELETE", "/api/v4/core/OBJECT/CUST/CITY_ID"],
    ];
    for (const [method, url] of indexing)
      expect(backendTimeoutMs(config, method!, url!), `${method} ${url}`).toBe(2700);
    const plain = [
      ["GET", "/api/v4/core/DIM"],
      ["GET", "/api/v4/core/VAR?filter[COD_DIM]=CUST"],
      ["POST", "/api/v4/core/COST"],
      ["PATCH", "/api/v4/core/COST/CUST/1"],
      ["POST", "/api/v4/core/MENU"],
      ["DELETE", "/api/v4/core/SORT/CUST/K"],
      ["POST", "/api/v4/core/DOCUMENT"],
      ["POST", "/api/v4/core/DIMS"],
      ["POST", "/api/v4/core/CUST"],
      ["PATCH", "/api/v4/core/dim/1"],
    ];
    for (const [method, url] of plain)
      expect(backendTimeoutMs(config, method!, url!), `${method} ${url}`).toBe(300);
    // An import stays an import's.
    expect(backendTimeoutMs(config, "POST", "/api/v4/core/DIM/import")).toBe(1100);
    // The defaults: 30 s + 30 s + 1 h + 30 s.
    expect(
      backendTimeoutMs(loadConfig(env("http://127.0.0.1:1")), "PATCH", "/api/v4/core/VAR/CUST/NAME"),
    ).toBe(3_690_000);
    // INDEX_BUILD_TIMEOUT_MS=0 bounds no build: nor does the gateway (undici's 0).
    const unbounded = loadConfig(env("http://127.0.0.1:1", { ...timeouts, INDEX_BUILD_TIMEOUT_MS: "0" }));
    expect(backendTimeoutMs(unbounded, "PATCH", "/api/v4/core/DIM/CUST")).toBe(0);
    expect(backendTimeoutMs(unbounded, "PATCH", "/api/v4/core/COST/CUST/1")).toBe(300);
    // Never past what a timer holds (it would fire at once).
    const huge = loadConfig(env("http://127.0.0.1:1", { INDEX_BUILD_TIMEOUT_MS: "2147483647" }));
    expect(backendTimeoutMs(huge, "POST", "/api/v4/core/VAR")).toBe(2_147_483_647);
  });

  it("a hanging backend: a VAR write's 504 comes after the longer wait, a COST write's after BACKEND_TIMEOUT_MS", async () => {
    const hanging = await backend("hanging", { hang: true });
    backends.push(hanging);
    const gw = await start(hanging.url, timeouts);
    const timed = async (method: "PATCH" | "POST", url: string) => {
      const t0 = performance.now();
      const res = await gw.inject({ method, url, payload: { data: {} } });
      return { res, ms: performance.now() - t0 };
    };
    const [cost, variable] = await Promise.all([
      timed("PATCH", "/api/v4/core/COST/CUST/1"),
      timed("PATCH", "/api/v4/core/VAR/CUST/NAME"),
    ]);
    for (const { res } of [cost, variable]) {
      expect(res.statusCode).toBe(504);
      expect(res.json()).toMatchObject({ code: "BACKEND_TIMEOUT", status: 504 });
    }
    // undici checks its timeouts on a timer of about half a second.
    expect(cost.ms).toBeLessThan(1500);
    expect(variable.ms).toBeGreaterThanOrEqual(2650);
  });

  it("the client gets the backend's answer of a DIM write that outlasts BACKEND_TIMEOUT_MS (no bound with INDEX_BUILD_TIMEOUT_MS=0)", async () => {
    const held = await heldBackend();
    backends.push(held);
    const gw = await start(held.url, { ...timeouts, INDEX_BUILD_TIMEOUT_MS: "0" });
    const dim = gw.inject({ method: "PATCH", url: "/api/v4/core/DIM/CUST", payload: { data: {} } });
    await held.waitFor("/api/v4/core/DIM/CUST");
    // Sent after the DIM write reached the backend: its 504 means BACKEND_TIMEOUT_MS has passed
    // for the DIM write too (whose timer, if it had that one, would have fired first).
    const cost = await gw.inject({ method: "PATCH", url: "/api/v4/core/COST/CUST/1", payload: { data: {} } });
    expect(cost.statusCode).toBe(504);
    held.release("/api/v4/core/DIM/CUST");
    const answered = await dim;
    expect(answered.statusCode).toBe(200);
    expect(answered.json()).toEqual({ released: "/api/v4/core/DIM/CUST" });
  });
});

// Two gateways share their counters through Redis: what one spent, the other sees.
const REDIS_SETUPS = TEST_REDIS_URL ? [TEST_REDIS_URL] : [];
describe.each(REDIS_SETUPS)("rate limits shared by two gateways (Redis %s)", (redisUrl) => {
  let read: Backend;
  const gateways: FastifyInstance[] = [];
  beforeAll(async () => {
    read = await backend("read");
    const env = {
      ROLE: "gateway",
      GATEWAY_SECRET: "s",
      READ_BACKEND_URL: read.url,
      WRITE_BACKEND_URL: read.url,
      AUTH_BACKEND_URL: read.url,
      REDIS_URL: redisUrl,
      RATE_LIMIT_USER_PER_SECOND: "0",
      RATE_LIMIT_USER_PER_MINUTE: "0",
      RATE_LIMIT_USER_PER_HOUR: "5",
    };
    for (let i = 0; i < 2; i++) gateways.push(await buildGateway(loadConfig(env), createLogger("silent")));
  });
  afterAll(async () => {
    for (const g of gateways) await g.close();
    await read.close();
  });

  it("five requests an hour per token, whichever gateway they reach", async () => {
    const headers = { authorization: `Bearer token-${Date.now()}-${Math.random()}` };
    const statuses: number[] = [];
    for (let i = 0; i < 6; i++) {
      const res = await gateways[i % 2]!.inject({ method: "GET", url: "/api/v4/core/CUST", headers });
      statuses.push(res.statusCode);
      if (res.statusCode === 429) expect(res.json()).toMatchObject({ code: "RATE_LIMIT_EXCEEDED" });
    }
    expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    expect(read.seen.filter((s) => s.headers.authorization === headers.authorization)).toHaveLength(5);
  });
});
