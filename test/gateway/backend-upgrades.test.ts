// Upgrades on the service's own server: a backend (ROLE read, write, auth) takes a WebSocket
// upgrade only with the gateway's secret, as its HTTP requests (before, an upgrade reached graphql-ws
// without it); and a request offering another upgrade (h2c, from `curl --http2`) is served as the
// plain HTTP request it also is, on a backend as on ROLE=all (before: an empty 404 on every route).
import { request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { WebSocket } from "ws";
import { createTestApp, type TestApp } from "../helpers/env.ts";

const SECRET = "the-backends-secret";

/** A raw GET with `headers`: the status and body (an upgrade refused is an ordinary answer). */
function rawGet(port: number, path: string, headers: Record<string, string>) {
  return new Promise<{ status: number; body: string }>((resolve, reject) => {
    const req = httpRequest({ host: "127.0.0.1", port, path, headers }, (res) => {
      let body = "";
      res.on("data", (d) => {
        body += String(d);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
    });
    // A refused upgrade is answered on the socket: node reports it as a response, or as 'upgrade'.
    req.on("upgrade", (res, socket) => {
      socket.destroy();
      resolve({ status: res.statusCode ?? 0, body: "" });
    });
    req.on("error", reject);
    req.end();
  });
}

function opens(port: number, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve) => {
    const ws = new WebSocket(`ws://127.0.0.1:${port}/graphql`, "graphql-transport-ws", { headers });
    ws.on("open", () => {
      ws.close();
      resolve(101);
    });
    ws.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0));
    ws.on("error", () => {});
  });
}

describe("upgrades on a backend (ROLE=write) and on ROLE=all", () => {
  let backend: TestApp;
  let all: TestApp;
  let backendPort: number;
  let allPort: number;
  beforeAll(async () => {
    backend = await createTestApp("pglite", { env: { ROLE: "write", GATEWAY_SECRET: SECRET } });
    all = await createTestApp("pglite", {});
    await backend.app.listen({ host: "127.0.0.1", port: 0 });
    await all.app.listen({ host: "127.0.0.1", port: 0 });
    backendPort = (backend.app.server.address() as AddressInfo).port;
    allPort = (all.app.server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await backend?.close();
    await all?.close();
  });

  it("a backend refuses a WebSocket upgrade without the gateway's secret, 403 GATEWAY_REQUIRED", async () => {
    const refused = await rawGet(backendPort, "/graphql", {
      connection: "Upgrade",
      upgrade: "websocket",
      "sec-websocket-version": "13",
      "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
      "sec-websocket-protocol": "graphql-transport-ws",
    });
    expect(refused.status).toBe(403);
    expect(JSON.parse(refused.body)).toMatchObject({ code: "GATEWAY_REQUIRED", status: 403 });
    expect(await opens(backendPort, {})).toBe(403);
    expect(await opens(backendPort, { "x-gateway-secret": "not-it" })).toBe(403);
    expect(await opens(backendPort, { "x-gateway-secret": SECRET })).toBe(101);
  });

  it("a request offering an h2c upgrade is served as plain HTTP", async () => {
    const h2c = {
      connection: "Upgrade, HTTP2-Settings",
      upgrade: "h2c",
      "http2-settings": "AAMAAABkAARAAAAAAAIAAAAA",
    };
    const health = await rawGet(allPort, "/healthz", h2c);
    expect(health.status).toBe(200);
    expect(JSON.parse(health.body).status).toBe("ok");
    const api = await rawGet(allPort, "/api/v4/core/CITY?source=anag-3", h2c);
    expect(api.status).toBe(401);
    expect(JSON.parse(api.body)).toMatchObject({ code: "TOKEN_MISSING" });
    // On a backend too (its health checks need no secret).
    expect((await rawGet(backendPort, "/healthz", h2c)).status).toBe(200);
    // A WebSocket on ROLE=all still opens.
    expect(await opens(allPort, {})).toBe(101);
  });
});
