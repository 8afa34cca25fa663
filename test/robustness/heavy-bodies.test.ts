// Large bodies take turns per tenant (HEAVY_BODY_BYTES; src/http/protected.ts): parsing a body of
// megabytes holds the event loop, so one tenant's large bodies are read one at a time per process
// (in its heavy lane), while another tenant's large bodies and everyone's small requests go on.
// The caller is authenticated before a byte of a large body is read: no token, no reading.
// Real sockets on loopback: the first large body is held unfinished by the test, so what the
// lane does meanwhile is seen.
import net from "node:net";
import type { FastifyRequest } from "fastify";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../events/support.ts";
import { heavyGauge } from "./support.ts";
import { loginAs, SAMPLE_USERS, UNLIMITED_ENV } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { isLargeBody } from "../../src/http/protected.ts";

const BODY_BYTES = 4096;

/** A GraphQL POST whose body is `size` bytes (an unused variable pads it). */
function graphqlBody(size: number): string {
  const head = '{"query":"{ __typename }","variables":{"pad":"';
  const tail = '"}}';
  return head + "x".repeat(size - head.length - tail.length) + tail;
}

interface RawRequest {
  /** Sends the rest of the body. */
  finish(): void;
  /** The status of the answer, once it comes. */
  status: Promise<number>;
}

/** A POST /graphql on a raw socket, its body sent only up to `sent` bytes until finish(). */
function rawPost(port: number, token: string | null, body: string, sent = body.length): RawRequest {
  const socket = net.connect(port, "127.0.0.1");
  let answer = "";
  const status = new Promise<number>((resolve, reject) => {
    socket.on("data", (chunk) => {
      answer += chunk.toString("latin1");
      const match = /^HTTP\/1\.1 (\d{3})/.exec(answer);
      if (match) resolve(Number(match[1]));
    });
    socket.on("error", reject);
    socket.on("close", () => reject(new Error(`closed without an answer: ${answer}`)));
  });
  status.catch(() => {});
  socket.write(
    `POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
      (token ? `Authorization: Bearer ${token}\r\n` : "") +
      "Connection: close\r\n\r\n" +
      body.slice(0, sent),
  );
  return { finish: () => socket.write(body.slice(sent)), status };
}

describe("large bodies take turns per tenant", () => {
  let t: TestApp;
  let port: number;
  const tokens: Record<string, string> = {};

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: {
        ...UNLIMITED_ENV,
        HEAVY_BODY_BYTES: String(BODY_BYTES),
        TENANT_HEAVY_REQUESTS: "1",
        TENANT_HEAVY_WAITING: "1",
      },
    });
    tokens.anna = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    tokens.greta = await loginAs(t.app, SAMPLE_USERS.greta.username, SAMPLE_USERS.greta.password);
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    port = (t.app.server.address() as net.AddressInfo).port;
  }, 60_000);
  afterAll(async () => {
    await t?.close();
  });

  it("a tenant's second large body waits for its first; its third is refused; others go on", async () => {
    const large = graphqlBody(BODY_BYTES * 4);
    // Tenant A's first large body: its turn taken, its body held unfinished.
    const first = rawPost(port, tokens.anna!, large, 100);
    await eventually(async () => (await heavyGauge(t, "running")) === 1);
    // Its second waits in the lane (the whole body sent, not read).
    const second = rawPost(port, tokens.anna!, large);
    await eventually(async () => (await heavyGauge(t, "waiting")) === 1);
    // Its third: past TENANT_HEAVY_WAITING, refused before its body is read.
    expect(await rawPost(port, tokens.anna!, large).status).toBe(429);

    // Meanwhile: tenant A's small request and tenant B's large one are answered.
    expect(await rawPost(port, tokens.anna!, graphqlBody(BODY_BYTES / 2)).status).toBe(200);
    expect(await rawPost(port, tokens.greta!, large).status).toBe(200);

    // The first body ends: both of tenant A's large requests are answered, the lane empties.
    first.finish();
    expect(await first.status).toBe(200);
    expect(await second.status).toBe(200);
    await eventually(
      async () => (await heavyGauge(t, "running")) === 0 && (await heavyGauge(t, "waiting")) === 0,
    );
  });

  it("a large body without a valid token is refused before it is read", async () => {
    const large = graphqlBody(BODY_BYTES * 4);
    // Only the first 100 bytes are ever sent: the answer cannot wait for the body.
    expect(await rawPost(port, null, large, 100).status).toBe(401);
    expect(await rawPost(port, "not-a-token", large, 100).status).toBe(401);
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
