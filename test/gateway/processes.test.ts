// Gateway, read, write and auth as separate processes on loopback (issue 13), on the real
// PostgreSQL and Redis: login, list, create, patch, delete and an upload go through the gateway;
// each backend's /metrics shows what reached it; a body over 1 MB sent with `Expect: 100-continue`
// (as curl sends it) is forwarded; an import outlasting BACKEND_TIMEOUT_MS gets the write backend's
// answer; a backend called directly is refused; a stopped backend is a 502 within a second.
import http from "node:http";
import type { AddressInfo } from "node:net";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { chooseBackend } from "../../src/gateway/routing.ts";
import { buildGateway } from "../../src/gateway/server.ts";
import { createLogger } from "../../src/logger.ts";
import { loginOverHttp, SAMPLE_USERS } from "../helpers/auth.ts";
import { TEST_DATABASE_URL, TEST_REDIS_URL } from "../helpers/env.ts";
import { stopRunning } from "../helpers/process.ts";
import { printLogsOnFailure, type Role, startTopology, type Topology } from "../helpers/topology.ts";

/**
 * A request whose body is sent as curl sends one over 1 MB: with `Expect: 100-continue`, the body
 * only once the server answered 100 Continue. Its status, its JSON body, and whether it continued.
 */
function sendExpectingContinue(url: string, headers: Record<string, string>, body: Buffer) {
  return new Promise<{ status: number; continued: boolean; body: unknown }>((resolve, reject) => {
    let continued = false;
    const req = http.request(url, {
      method: "POST",
      headers: { ...headers, "content-length": String(body.length), expect: "100-continue" },
    });
    req.on("continue", () => {
      continued = true;
      req.end(body);
    });
    req.on("response", (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        text += c;
      });
      res.on("end", () => resolve({ status: res.statusCode!, continued, body: JSON.parse(text) }));
    });
    req.on("error", reject);
  });
}

it("routing is a function of method, path and headers (no processes needed)", () => {
  const config = loadConfig({
    ROLE: "gateway",
    GATEWAY_SECRET: "s",
    READ_BACKEND_URL: "http://read",
    WRITE_BACKEND_URL: "http://write",
    AUTH_BACKEND_URL: "http://auth",
  });
  expect(chooseBackend(config, "GET", "/api/v4/core/CUST", {}).url).toBe("http://read");
  expect(chooseBackend(config, "DELETE", "/api/v4/core/CUST/1", {}).url).toBe("http://write");
  expect(chooseBackend(config, "GET", "/api/v4/auth/logout", {}).url).toBe("http://auth");
  expect(chooseBackend(config, "POST", "/auth/login", {}).url).toBe("http://auth");
  expect(chooseBackend(config, "POST", "/api/v4/authors", {}).url).toBe("http://write");
});

const SETUPS = TEST_DATABASE_URL && TEST_REDIS_URL ? [{ db: TEST_DATABASE_URL, redis: TEST_REDIS_URL }] : [];

describe.each(SETUPS)("gateway and backends as processes", ({ redis }) => {
  let topology: Topology;
  const url = (role: Role) => topology.url(role);

  beforeAll(async () => {
    topology = await startTopology({
      roles: ["gateway", "read", "write", "auth"],
      env: { REDIS_URL: redis },
    });
  }, 90_000);
  afterAll(async () => {
    await topology?.stop();
  });
  printLogsOnFailure(() => topology);

  const metricsOf = async (role: Role) => {
    const res = await fetch(`${url(role)}/metrics`, { headers: { "x-gateway-secret": topology.secret } });
    expect(res.status).toBe(200);
    const family = parsePrometheusTextFormat(await res.text()).find(
      (f) => f.name === "dimensio_http_requests_total",
    );
    return (method: string, route: string, status: string) =>
      Number(
        family?.metrics.find(
          (m) => m.labels?.method === method && m.labels?.route === route && m.labels?.status === status,
        )?.value ?? 0,
      );
  };

  it("login, list, create, patch, delete and an upload reach the right backend through the gateway", async () => {
    const gw = url("gateway");
    const login = await fetch(`${gw}/auth/login`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ username: "anna", password: "anna-secret-1" }),
    });
    expect(login.status).toBe(200);
    const token = ((await login.json()) as { data: { access_token: string } }).data.access_token;
    const auth = { authorization: `Bearer ${token}` };
    const json = { ...auth, "content-type": "application/json" };

    const list = await fetch(`${gw}/api/v4/core/CITY?source=anag-3`, { headers: auth });
    expect(list.status).toBe(200);
    const created = await fetch(`${gw}/api/v4/core/CITY?source=anag-3`, {
      method: "POST",
      headers: json,
      body: JSON.stringify({ data: { CITY_ID: "GWY", NAME: "Gateway", COUNTRY: "IT" } }),
    });
    expect(created.status).toBe(201);
    const patched = await fetch(`${gw}/api/v4/core/CITY/GWY?source=anag-3`, {
      method: "PATCH",
      headers: json,
      body: JSON.stringify({ data: { NAME: "Gateway City" } }),
    });
    expect(patched.status).toBe(200);
    const deleted = await fetch(`${gw}/api/v4/core/CITY/GWY?source=anag-3`, {
      method: "DELETE",
      headers: auth,
    });
    expect(deleted.status).toBe(200);

    const image = await sharp({ create: { width: 64, height: 32, channels: 3, background: "#0a0" } })
      .png()
      .toBuffer();
    const fd = new FormData();
    fd.append("dimension", "PROD");
    fd.append("record_id", "P0001");
    fd.append("field", "IMAGE");
    fd.append("file", new Blob([new Uint8Array(image)], { type: "image/png" }), "g.png");
    const upload = await fetch(`${gw}/api/v4/media/upload?source=catalog-1`, {
      method: "POST",
      headers: auth,
      body: fd,
    });
    expect(upload.status).toBe(201);
    const download = await fetch(`${gw}/api/v4/media/PROD/P0001/IMAGE?source=catalog-1`, { headers: auth });
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).equals(image)).toBe(true);

    const authCount = await metricsOf("auth");
    const readCount = await metricsOf("read");
    const writeCount = await metricsOf("write");
    expect(authCount("POST", "/auth/login", "200")).toBe(1);
    expect(readCount("GET", "/api/v4/core/:dim", "200")).toBe(1);
    expect(readCount("GET", "/api/v4/media/:dim/:id/:field", "200")).toBe(1);
    expect(writeCount("POST", "/api/v4/core/:dim", "201")).toBe(1);
    expect(writeCount("PATCH", "/api/v4/core/:dim/:id", "200")).toBe(1);
    expect(writeCount("DELETE", "/api/v4/core/:dim/:id", "200")).toBe(1);
    expect(writeCount("POST", "/api/v4/media/upload", "201")).toBe(1);
    // Nothing went to the wrong backend.
    expect(readCount("POST", "/api/v4/core/:dim", "201")).toBe(0);
    expect(writeCount("GET", "/api/v4/core/:dim", "200")).toBe(0);
    expect(authCount("GET", "/api/v4/core/:dim", "200")).toBe(0);
  });

  const login = () => loginOverHttp(url("gateway"), SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);

  it("a body over 1 MB sent with Expect: 100-continue is forwarded: an upload and a create through the gateway", async () => {
    const gw = url("gateway");
    const auth = { authorization: `Bearer ${await login()}` };
    // Noise does not compress: some 1.5 MB of PNG.
    const image = await sharp({
      create: {
        width: 700,
        height: 700,
        channels: 3,
        background: "#000",
        noise: { type: "gaussian", mean: 128, sigma: 60 },
      },
    })
      .png({ compressionLevel: 0 })
      .toBuffer();
    expect(image.length).toBeGreaterThan(1024 * 1024);
    const fd = new FormData();
    fd.append("dimension", "PROD");
    fd.append("record_id", "P0002");
    fd.append("field", "IMAGE");
    fd.append("file", new Blob([new Uint8Array(image)], { type: "image/png" }), "big.png");
    // The multipart body as fetch would send it.
    const multipart = new Response(fd);
    const body = Buffer.from(await multipart.arrayBuffer());
    const upload = await sendExpectingContinue(
      `${gw}/api/v4/media/upload?source=catalog-1`,
      { ...auth, "content-type": multipart.headers.get("content-type")! },
      body,
    );
    expect(upload.continued).toBe(true);
    expect(upload.status, JSON.stringify(upload.body)).toBe(201);
    expect(upload.body).toMatchObject({ size: image.length });
    const download = await fetch(`${gw}/api/v4/media/PROD/P0002/IMAGE?source=catalog-1`, { headers: auth });
    expect(download.status).toBe(200);
    expect(Buffer.from(await download.arrayBuffer()).equals(image)).toBe(true);

    // A small body with the header (clients such as .NET's send it with every POST).
    const created = await sendExpectingContinue(
      `${gw}/api/v4/core/CITY?source=anag-3`,
      { ...auth, "content-type": "application/json" },
      Buffer.from(JSON.stringify({ data: { CITY_ID: "EXP", NAME: "Expect", COUNTRY: "IT" } })),
    );
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  });

  it("an import that outlasts BACKEND_TIMEOUT_MS gets the write backend's answer, not 504 BACKEND_TIMEOUT", async () => {
    const token = await login();
    // A gateway whose backends get 200 ms (undici checks its timeouts every half second or so): an
    // import of some seconds is given its own bound (routing.ts backendTimeoutMs).
    const gateway = await buildGateway(
      loadConfig({
        ROLE: "gateway",
        GATEWAY_SECRET: topology.secret,
        BACKEND_TIMEOUT_MS: "200",
        READ_BACKEND_URL: url("read"),
        WRITE_BACKEND_URL: url("write"),
        AUTH_BACKEND_URL: url("auth"),
        RATE_LIMIT_ANONYMOUS_PER_MINUTE: "0",
        RATE_LIMIT_USER_PER_SECOND: "0",
        RATE_LIMIT_USER_PER_MINUTE: "0",
        RATE_LIMIT_USER_PER_HOUR: "0",
      }),
      createLogger("silent"),
    );
    try {
      await gateway.listen({ host: "127.0.0.1", port: 0 });
      const base = `http://127.0.0.1:${(gateway.server.address() as AddressInfo).port}`;
      let csv = "CITY_ID,NAME,COUNTRY\n";
      for (let i = 0; i < 8000; i++) csv += `GI${i},Imported ${i},IT\n`;
      const t0 = performance.now();
      const res = await fetch(`${base}/api/v4/core/CITY/import?source=anag-3&mode=create`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "text/csv" },
        body: csv,
      });
      const body = (await res.json()) as { data: { received: number; created: number } };
      expect(res.status, JSON.stringify(body)).toBe(200);
      expect(body.data).toMatchObject({ received: 8000, created: 8000 });
      // It did outlast the gateway's timeout of other requests.
      expect(performance.now() - t0).toBeGreaterThan(1000);
    } finally {
      await gateway.close();
    }
  });

  it("a backend called directly is refused", async () => {
    for (const name of ["read", "write", "auth"] as const) {
      const res = await fetch(`${url(name)}/api/v4/core/CITY?source=anag-3`);
      expect(res.status, name).toBe(403);
      expect(((await res.json()) as { code: string }).code).toBe("GATEWAY_REQUIRED");
    }
  });

  it("a stopped backend answers 502 through the gateway within a second", async () => {
    await stopRunning(topology.processes.read!);
    const t0 = Date.now();
    const res = await fetch(`${url("gateway")}/api/v4/core/CITY?source=anag-3`);
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(res.status).toBe(502);
    expect(((await res.json()) as { code: string }).code).toBe("BACKEND_UNAVAILABLE");
  });
});
