// The gateway (decisions.md §9, issue 13) in front of backends that are real HTTP servers on
// loopback reporting what reached them: method routing, auth paths, canary, developer (development
// only) and microservice routing, the secret and X-Request-ID passed on, bodies streamed both ways,
// 502 for a stopped backend, 504 for one that hangs (an import waits as long as the write backend
// may take for it), `Expect: 100-continue` forwarded without the header, WebSocket upgrades on the
// GraphQL paths piped to the write backend byte for byte (any other upgrade served as a plain
// request), and rate limits shared by two gateways through Redis.
import { createHash } from "node:crypto";
import http from "node:http";
import net, { type AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { GRAPHQL_PATHS as SERVED_GRAPHQL_PATHS } from "../../src/graphql/plugin.ts";
import { backendTimeoutMs, chooseBackend, GRAPHQL_PATHS } from "../../src/gateway/routing.ts";
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
    ROLE: "gateway",
    GATEWAY_SECRET: "shared-secret",
    LOG_LEVEL: "silent",
    READ_BACKEND_URL: b.read!.url,
    WRITE_BACKEND_URL: b.write!.url,
    AUTH_BACKEND_URL: b.auth!.url,
    CANARY_READ_URL: b.canaryRead!.url,
    CANARY_WRITE_URL: b.canaryWrite!.url,
    MICROSERVICE_ROUTES: JSON.stringify({ pricing: b.pricing!.url }),
    DEVELOPER_ROUTES: JSON.stringify({ ada: b.ada!.url }),
    BACKEND_TIMEOUT_MS: "400",
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: "0",
    RATE_LIMIT_USER_PER_SECOND: "0",
    RATE_LIMIT_USER_PER_MINUTE: "0",
    RATE_LIMIT_USER_PER_HOUR: "0",
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
    ROLE: "gateway",
    GATEWAY_SECRET: "shared-secret",
    LOG_LEVEL: "silent",
    READ_BACKEND_URL: read.url,
    WRITE_BACKEND_URL: write.url,
    AUTH_BACKEND_URL: read.url,
    RATE_LIMIT_ANONYMOUS_PER_MINUTE: "0",
    RATE_LIMIT_USER_PER_SECOND: "0",
    RATE_LIMIT_USER_PER_MINUTE: "0",
    RATE_LIMIT_USER_PER_HOUR: "0",
    ...more,
  });
  /** A gateway listening on loopback, closed after the tests; its base URL. */
  const start = async (more: Record<string, string> = {}) => {
    const gw = await buildGateway(loadConfig(env(more)), createLogger("silent"));
    open.push(gw);
    await gw.listen({ host: "127.0.0.1", port: 0 });
    return { gw, base: `http://127.0.0.1:${(gw.server.address() as AddressInfo).port}` };
  };

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
