// The gateway (decisions.md §9, issue 13) in front of backends that are real HTTP servers on
// loopback reporting what reached them: method routing, auth paths, canary, developer (development
// only) and microservice routing, the secret and X-Request-ID passed on, bodies streamed both ways,
// 502 for a stopped backend, 504 for one that hangs, and rate limits shared by two gateways
// through Redis.
import { createHash } from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { chooseBackend } from "../../src/gateway/routing.ts";
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
