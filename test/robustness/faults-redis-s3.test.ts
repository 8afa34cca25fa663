// Issue 18 §1, Redis and object storage faults, injected through TCP proxies this file starts.
// - Redis cut (or not answering): requests are still answered, quickly, the limits still hold from
//   each process's memory, and dimensio_rate_limit_fallbacks_total counts the decisions made so;
//   once Redis is back the counters are shared in Redis again. For the API and for the gateway.
// - S3 (s3rver) cut, or the local media directory unusable: uploads and downloads answer 503
//   MEDIA_STORE_UNAVAILABLE in the standard error body, and work again once the store is back.
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, rename, rm, writeFile } from "node:fs/promises";
import http from "node:http";
import type net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { Redis } from "ioredis";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { buildGateway } from "../../src/gateway/server.ts";
import { createLogger } from "../../src/logger.ts";
import type { Services } from "../../src/services.ts";
import { eventually } from "../events/support.ts";
import { bearer, buildAuthApp, loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { createTestApp, TEST_REDIS_URL, type TestApp } from "../helpers/env.ts";
import { faultyProxy, throughProxy } from "../helpers/proxy.ts";
import { s3Env, startS3rver } from "../media/media-setup.ts";

/** The value of a counter with these labels in a Prometheus text exposition (0 when absent). */
function counterValue(text: string, name: string, labels: Record<string, string>): number {
  for (const line of text.split("\n")) {
    if (!line.startsWith(`${name}{`)) continue;
    const labelText = line.slice(name.length + 1, line.indexOf("}"));
    if (Object.entries(labels).every(([k, v]) => labelText.includes(`${k}="${v}"`)))
      return Number(line.slice(line.indexOf("}") + 1).trim());
  }
  return 0;
}

if (TEST_REDIS_URL) {
  const redisUrl = new URL(TEST_REDIS_URL);

  describe("Redis down: rate limits of the API", () => {
    let t: TestApp;
    let app: FastifyInstance;
    let proxy: Awaited<ReturnType<typeof faultyProxy>>;
    let redis: Redis;
    let token: string;
    const prefix = `dimensio:test:faults:${randomBytes(6).toString("hex")}`;

    beforeAll(async () => {
      proxy = await faultyProxy(redisUrl.hostname, Number(redisUrl.port || 6379));
      const viaProxy = throughProxy(TEST_REDIS_URL!, proxy);
      t = await createTestApp("pglite", {
        fixture: "sample",
        env: { ...UNLIMITED_ENV, RATE_LIMIT_USER_PER_MINUTE: "3" },
      });
      const services: Services = {
        ...t.services,
        config: { ...t.services.config, redisUrl: viaProxy },
      };
      app = await buildAuthApp(services, { rateLimitPrefix: prefix });
      redis = new Redis(TEST_REDIS_URL!);
      token = await loginAs(app, SAMPLE_USERS.marco.username, SAMPLE_USERS.marco.password);
    });
    afterAll(async () => {
      await app?.close();
      await t?.close();
      await proxy?.close();
      if (redis) {
        const keys = await redis.keys(`${prefix}:*`);
        if (keys.length) await redis.del(...keys);
        await redis.quit();
      }
    });

    const me = async () => {
      const started = performance.now();
      const res = await app.inject({ method: "GET", url: "/auth/me", headers: bearer(token) });
      return { res, ms: performance.now() - started };
    };
    const fallbacks = async () =>
      counterValue(await t.services.metrics.registry.metrics(), "dimensio_rate_limit_fallbacks_total", {
        window: "user:min",
      });

    it("counts in Redis while it answers; cut: answered from memory, the limit still holds, each fallback counted; back: Redis again", async () => {
      const first = await me();
      expect(first.res.statusCode).toBe(200);
      expect(Number(await redis.get(`${prefix}:user:min:marco`))).toBe(1);
      expect(await fallbacks()).toBe(0);

      proxy.cut();
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) {
        const { res, ms } = await me();
        statuses.push(res.statusCode);
        expect(ms).toBeLessThan(1500);
        if (res.statusCode === 429)
          expect(res.json()).toMatchObject({ code: "RATE_LIMIT_EXCEEDED", status: 429, limit: 3 });
      }
      // This process's own window: three more, then 429 (Redis, unreachable, still holds 1).
      expect(statuses).toEqual([200, 200, 200, 429]);
      expect(await fallbacks()).toBe(4);
      expect(Number(await redis.get(`${prefix}:user:min:marco`))).toBe(1);

      proxy.restore();
      // The client reconnects on its own; the next decisions are Redis's again (it says 2, then 3).
      await eventually(
        async () => {
          const before = Number(await redis.get(`${prefix}:user:min:marco`));
          await me();
          return Number(await redis.get(`${prefix}:user:min:marco`)) > before;
        },
        { what: "counting in Redis again", timeoutMs: 20_000 },
      );
    });

    it("Redis that does not answer: each request waits at most the command timeout, then memory decides", async () => {
      const before = await fallbacks();
      proxy.stall();
      try {
        const { res, ms } = await me();
        // Answered (from memory: the window of the previous test is long spent there, so 429).
        expect([200, 429]).toContain(res.statusCode);
        expect(res.json()).not.toMatchObject({ status: 500 });
        expect(ms).toBeLessThan(1500);
        expect(await fallbacks()).toBeGreaterThan(before);
      } finally {
        proxy.restore();
      }
    });
  });

  describe("Redis down: the whole API's health and anonymous calls", () => {
    let t: TestApp;
    let proxy: Awaited<ReturnType<typeof faultyProxy>>;

    beforeAll(async () => {
      proxy = await faultyProxy(redisUrl.hostname, Number(redisUrl.port || 6379));
      const viaProxy = throughProxy(TEST_REDIS_URL!, proxy);
      t = await createTestApp("pglite", { fixture: "sample", env: { REDIS_URL: viaProxy } });
    });
    afterAll(async () => {
      await t?.close();
      await proxy?.close();
    });

    const timed = async (url: string) => {
      const started = performance.now();
      const res = await t.app.inject({ method: "GET", url });
      return { res, ms: performance.now() - started };
    };

    it("cut or silent: /healthz and an anonymous call answer within the command timeout; /healthz shows Redis down, then up again", async () => {
      await eventually(async () => (await timed("/healthz")).res.json().dependencies.redis === "up", {
        what: "Redis up",
      });
      for (const fault of ["cut", "stall"] as const) {
        proxy[fault]();
        const health = await timed("/healthz");
        expect(health.res.statusCode).toBe(200);
        expect(health.ms).toBeLessThan(1500);
        const anonymous = await timed("/api/v4/core/CITY?source=anag-3");
        expect(anonymous.res.statusCode).toBe(401);
        expect(anonymous.ms).toBeLessThan(1500);
        await eventually(async () => (await timed("/healthz")).res.json().dependencies.redis !== "up", {
          what: `Redis shown not up (${fault})`,
        });
        expect((await timed("/readyz")).res.statusCode).toBe(200);
        proxy.restore();
        await eventually(async () => (await timed("/healthz")).res.json().dependencies.redis === "up", {
          what: `Redis up again after the ${fault}`,
          timeoutMs: 20_000,
        });
      }
    });
  });

  describe("Redis down: rate limits of the gateway", () => {
    let backend: http.Server;
    let gateway: FastifyInstance;
    let proxy: Awaited<ReturnType<typeof faultyProxy>>;
    const reached: string[] = [];

    beforeAll(async () => {
      backend = http.createServer((req, res) => {
        reached.push(String(req.headers.authorization));
        res.writeHead(200, { "content-type": "application/json" }).end("{}");
      });
      await new Promise<void>((resolve) => backend.listen(0, "127.0.0.1", resolve));
      const backendUrl = `http://127.0.0.1:${(backend.address() as net.AddressInfo).port}`;
      proxy = await faultyProxy(redisUrl.hostname, Number(redisUrl.port || 6379));
      const viaProxy = throughProxy(TEST_REDIS_URL!, proxy);
      gateway = await buildGateway(
        loadConfig({
          ROLE: "gateway",
          GATEWAY_SECRET: "s",
          READ_BACKEND_URL: backendUrl,
          WRITE_BACKEND_URL: backendUrl,
          AUTH_BACKEND_URL: backendUrl,
          REDIS_URL: viaProxy,
          RATE_LIMIT_USER_PER_SECOND: "0",
          RATE_LIMIT_USER_PER_MINUTE: "0",
          RATE_LIMIT_USER_PER_HOUR: "5",
        }),
        createLogger("silent"),
      );
    });
    afterAll(async () => {
      await gateway?.close();
      await proxy?.close();
      await new Promise<void>((resolve) => backend?.close(() => resolve()));
    });

    it("the shared limits fall back to the gateway's memory: requests proxied, the limit enforced, fallbacks in /metrics", async () => {
      proxy.cut();
      const headers = { authorization: `Bearer token-${randomBytes(8).toString("hex")}` };
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await gateway.inject({ method: "GET", url: "/api/v4/core/CUST", headers });
        statuses.push(res.statusCode);
      }
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
      expect(reached.filter((a) => a === headers.authorization)).toHaveLength(5);
      const metrics = (
        await gateway.inject({ method: "GET", url: "/metrics", headers: { "x-gateway-secret": "s" } })
      ).body;
      expect(
        counterValue(metrics, "dimensio_rate_limit_fallbacks_total", { window: "user:h" }),
      ).toBeGreaterThanOrEqual(6);
    });
  });
}

/** A multipart body with the file and the record it goes to. */
function uploadForm(image: Buffer, record: string) {
  const fd = new FormData();
  fd.append("dimension", "PROD");
  fd.append("record_id", record);
  fd.append("field", "IMAGE");
  fd.append("file", new Blob([new Uint8Array(image)], { type: "image/png" }), "p.png");
  return fd;
}

interface MediaSetup {
  name: string;
  /** The store's settings; `fail` breaks it, `heal` mends it. */
  open(dataDir: string): Promise<{
    env: Record<string, string>;
    fail(): Promise<void>;
    heal(): Promise<void>;
    close(): Promise<void>;
  }>;
}

const MEDIA_SETUPS: MediaSetup[] = [
  {
    name: "S3 (s3rver) behind a proxy that is cut",
    async open() {
      const s3 = await startS3rver();
      const proxy = await faultyProxy("127.0.0.1", s3.port);
      return {
        env: s3Env(proxy.port),
        fail: async () => proxy.cut(),
        heal: async () => proxy.restore(),
        async close() {
          await proxy.close();
          await s3.close();
        },
      };
    },
  },
  {
    name: "local directory that cannot be used",
    async open(dataDir) {
      // DATA_DIR/media replaced by a plain file: every read and write of the store fails.
      const media = path.join(dataDir, "media");
      const aside = path.join(dataDir, "media-aside");
      return {
        env: {},
        async fail() {
          await mkdir(media, { recursive: true });
          await rename(media, aside);
          await writeFile(media, "not a directory");
        },
        async heal() {
          await rm(media, { force: true });
          await rename(aside, media);
        },
        close: async () => {},
      };
    },
  },
];

describe.each(MEDIA_SETUPS)("media store down: $name", (setup) => {
  let t: TestApp;
  let base: string;
  let dataDir: string;
  let store: Awaited<ReturnType<MediaSetup["open"]>>;
  let token: string;

  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(tmpdir(), "dimensio-faults-media-"));
    store = await setup.open(dataDir);
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...UNLIMITED_ENV, DATA_DIR: dataDir, EVENTS_POLL_MS: "60000", ...store.env },
    });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as net.AddressInfo).port}`;
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
  });
  afterAll(async () => {
    await t?.close();
    await store?.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  const upload = (image: Buffer, record: string) =>
    fetch(`${base}/api/v4/media/upload?source=catalog-1`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
      body: uploadForm(image, record),
    });
  const download = (record: string) =>
    fetch(`${base}/api/v4/media/PROD/${record}/IMAGE?source=catalog-1`, {
      headers: { authorization: `Bearer ${token}` },
    });
  const expect503 = async (res: Response) => {
    expect(res.status).toBe(503);
    expect(res.headers.get("retry-after")).toBe("5");
    expect(await res.json()).toEqual({
      error: "ServiceUnavailable",
      code: "MEDIA_STORE_UNAVAILABLE",
      status: 503,
      message: "The media store is unavailable; retry later.",
    });
  };

  it("upload and download answer 503 MEDIA_STORE_UNAVAILABLE while the store is down, and work once it is back", async () => {
    const image = await sharp({
      create: { width: 40, height: 20, channels: 3, background: { r: 10, g: 200, b: 10 } },
    })
      .png()
      .toBuffer();
    expect((await upload(image, "P0001")).status).toBe(201);
    expect((await download("P0001")).status).toBe(200);

    await store.fail();
    try {
      await expect503(await upload(image, "P0002"));
      await expect503(await download("P0001"));
      // The record did not take a media field that has no bytes behind it.
      const record = await (
        await fetch(`${base}/api/v4/core/PROD/P0002?source=catalog-1`, {
          headers: { authorization: `Bearer ${token}` },
        })
      ).json();
      expect(record.data.IMAGE ?? null).toBeNull();
    } finally {
      await store.heal();
    }

    await eventually(async () => (await download("P0001")).status === 200, { what: "downloads again" });
    const again = await download("P0001");
    expect(Buffer.from(await again.arrayBuffer()).equals(image)).toBe(true);
    expect((await upload(image, "P0002")).status).toBe(201);
    expect((await download("P0002")).status).toBe(200);
  });
});
