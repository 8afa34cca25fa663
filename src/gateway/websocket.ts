// GraphQL over WebSocket through the gateway: an upgrade to WebSocket on a GraphQL path
// (GRAPHQL_PATHS) is proxied to the backend that takes GraphQL POSTs (chooseBackend as for a POST:
// the write backend, or the canary, microservice or developer one its headers name), since a
// socket carries mutations as well as queries and subscriptions. The gateway opens the backend's
// handshake with the client's headers plus its secret, the request id and X-Forwarded-For (as for
// any request it forwards), relays the backend's answer (its 101, or its refusal as it is), and once
// switched pipes the two connections byte for byte: the protocol (graphql-transport-ws), its
// authentication (connection_init) and its heartbeats are the backend's business.
//   - Every other upgrade (h2c from `curl --http2`, a WebSocket on another path) is not taken: Node
//     serves it as a plain HTTP request (`shouldUpgradeCallback`), which the gateway forwards
//     without the upgrade headers as any other.
//   - The upgrade request spends the gateway's rate limits as an HTTP request does (per token when
//     its Authorization header has one, else per client address).
//   - A backend that cannot be reached is 502 BACKEND_UNAVAILABLE, one that does not answer the
//     handshake within BACKEND_TIMEOUT_MS 504 BACKEND_TIMEOUT, in the standard body; a gateway that
//     closes (SIGTERM) cuts its sockets, so that it does not wait for their clients.
import { randomUUID } from "node:crypto";
import http, { type IncomingMessage } from "node:http";
import https from "node:https";
import type { Duplex } from "node:stream";
import proxyAddr from "@fastify/proxy-addr";
import type { FastifyInstance } from "fastify";
import { ApiError, internalErrorBody } from "../errors.ts";
import type { Config } from "../types.ts";
import { chooseBackend, GRAPHQL_PATHS } from "./routing.ts";
import { GATEWAY_SECRET_HEADER } from "./secret.ts";

/** The request ids the gateway keeps from its caller (src/http/server.ts genReqId). */
const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;
/** A refusal's body read from a backend at most (errors are small; the rest is cut). */
const MAX_REFUSAL_BYTES = 64 * 1024;

export interface WebSocketProxyDeps {
  app: FastifyInstance;
  config: Config;
  secret: string;
  /**
   * The gateway's rate limits of a request: throws its 429, or gives the headers to show (as
   * server.ts's handler does for HTTP).
   */
  admit: (url: string, authorization: string | undefined, ip: string) => Promise<Record<string, string>>;
}

function pathOf(url: string): string {
  const end = url.indexOf("?");
  const path = end === -1 ? url : url.slice(0, end);
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

/** Whether Node hands this request to the `upgrade` listener: a WebSocket on a GraphQL path. */
export function proxiedUpgrade(request: IncomingMessage): boolean {
  return (
    request.method === "GET" &&
    String(request.headers.upgrade ?? "").toLowerCase() === "websocket" &&
    GRAPHQL_PATHS.includes(pathOf(request.url ?? "/"))
  );
}

/** The client's address as Fastify's request.ip gives it (TRUST_PROXY, src/http/server.ts). */
function clientAddressOf(trust: Config["trustProxy"]): (request: IncomingMessage) => string {
  if (trust === false) return (request) => request.socket.remoteAddress ?? "";
  const fn =
    typeof trust === "number" ? (_addr: string, hop: number) => hop < trust : proxyAddr.compile(trust);
  return (request) => proxyAddr(request, fn);
}

/** An HTTP answer written on a socket that is not Node's response any more; the socket then ends. */
function answer(socket: Duplex, status: number, headers: Record<string, string>, body: Buffer): void {
  if (socket.destroyed) return;
  const lines = [`HTTP/1.1 ${status} ${http.STATUS_CODES[status] ?? ""}`];
  const all = { ...headers, "content-length": String(body.length), connection: "close" };
  for (const [name, value] of Object.entries(all)) lines.push(`${name}: ${value}`);
  socket.end(Buffer.concat([Buffer.from(`${lines.join("\r\n")}\r\n\r\n`, "latin1"), body]));
}

function answerError(socket: Duplex, err: ApiError, requestId: string): void {
  answer(
    socket,
    err.status,
    { ...err.headers, "content-type": "application/json; charset=utf-8", "x-request-id": requestId },
    Buffer.from(JSON.stringify(err.toBody())),
  );
}

/** Hop-by-hop headers of a backend's refusal, which the gateway answers with a body of its own length. */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "transfer-encoding", "content-length", "upgrade"]);

export function proxyGraphQLWebSockets(deps: WebSocketProxyDeps): void {
  const { app, config, secret } = deps;
  const server = app.server;
  const clientAddress = clientAddressOf(config.trustProxy);
  /** Open tunnels and handshakes under way: their sockets, cut when the gateway closes. */
  const open = new Set<Duplex>();
  let closing = false;

  const track = (socket: Duplex) => {
    open.add(socket);
    socket.once("close", () => open.delete(socket));
  };

  // Node ≥ 24.9: an upgrade this refuses is served as a plain request (the default takes every
  // upgrade once an `upgrade` listener is there).
  // (@types/node declares it as a createServer option only.)
  (server as { shouldUpgradeCallback?: (request: IncomingMessage) => boolean }).shouldUpgradeCallback =
    proxiedUpgrade;

  server.on("upgrade", (request: IncomingMessage, client: Duplex, head: Buffer) => {
    const given = request.headers["x-request-id"];
    const requestId = typeof given === "string" && REQUEST_ID_RE.test(given) ? given : randomUUID();
    const log = app.log.child({ reqId: requestId });
    client.on("error", (err) => log.debug({ err }, "websocket client connection failed"));
    track(client);
    if (closing) {
      return answerError(
        client,
        new ApiError(503, "SERVICE_CLOSING", "ServiceUnavailable", "The gateway is shutting down."),
        requestId,
      );
    }
    const ip = clientAddress(request);
    const url = request.url ?? "/";
    const target = chooseBackend(config, "POST", url, request.headers);
    const backendError = (status: 502 | 504) =>
      status === 504
        ? new ApiError(
            504,
            "BACKEND_TIMEOUT",
            "GatewayTimeout",
            `The ${target.name} backend did not answer in time.`,
          )
        : new ApiError(
            502,
            "BACKEND_UNAVAILABLE",
            "BadGateway",
            `The ${target.name} backend is unavailable.`,
          );

    const forward = (shown: Record<string, string>) => {
      // The client went away while its limits were counted: nothing to open.
      if (client.destroyed) return;
      const base = new URL(target.url);
      const headers: http.OutgoingHttpHeaders = { ...request.headers };
      headers.host = base.host;
      headers.connection = "Upgrade";
      headers.upgrade = "websocket";
      headers[GATEWAY_SECRET_HEADER] = secret;
      headers["x-request-id"] = requestId;
      headers["x-forwarded-for"] = ip;
      const upstream = (base.protocol === "https:" ? https : http).request({
        protocol: base.protocol,
        hostname: base.hostname,
        port: base.port,
        method: "GET",
        path: `${base.pathname.replace(/\/$/, "")}${url}`,
        headers,
        agent: false,
      });
      let settled = false;
      const fail = (status: 502 | 504, err: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        upstream.destroy();
        log.warn({ err, backend: target.name }, "backend upgrade failed");
        answerError(client, backendError(status), requestId);
      };
      const timer = setTimeout(
        () => fail(504, new Error("no answer to the upgrade in time")),
        config.gateway.backendTimeoutMs,
      );
      client.once("close", () => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        upstream.destroy();
      });
      upstream.on("error", (err) => fail(502, err));
      // A refusal (401, 403, 404, 429…): relayed as the backend answered it.
      upstream.on("response", (res) => {
        if (settled) return res.resume();
        settled = true;
        clearTimeout(timer);
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on("data", (chunk: Buffer) => {
          if (bytes < MAX_REFUSAL_BYTES) chunks.push(chunk);
          bytes += chunk.length;
        });
        res.on("error", () => client.destroy());
        res.on("end", () => {
          const out: Record<string, string> = { ...shown };
          for (const [name, value] of Object.entries(res.headers)) {
            if (value === undefined || HOP_BY_HOP.has(name)) continue;
            out[name] = Array.isArray(value) ? value.join(", ") : value;
          }
          out["x-request-id"] = requestId;
          answer(client, res.statusCode ?? 502, out, Buffer.concat(chunks).subarray(0, MAX_REFUSAL_BYTES));
        });
      });
      upstream.on("upgrade", (res, socket: Duplex, upgradeHead: Buffer) => {
        if (settled || client.destroyed) return socket.destroy();
        settled = true;
        clearTimeout(timer);
        track(socket);
        // The backend's 101 as it sent it, with the request id.
        const lines = [`HTTP/1.1 101 ${res.statusMessage ?? "Switching Protocols"}`];
        for (let i = 0; i < res.rawHeaders.length; i += 2) {
          if (res.rawHeaders[i]!.toLowerCase() === "x-request-id") continue;
          lines.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
        }
        lines.push(`X-Request-ID: ${requestId}`);
        client.write(`${lines.join("\r\n")}\r\n\r\n`, "latin1");
        if (upgradeHead.length) client.write(upgradeHead);
        if (head.length) socket.write(head);
        socket.on("error", (err) => log.debug({ err }, "websocket backend connection failed"));
        // Either side gone: the other goes too.
        socket.once("close", () => client.destroy());
        client.once("close", () => socket.destroy());
        socket.pipe(client);
        client.pipe(socket);
      });
      upstream.end();
    };

    const authorization = request.headers.authorization;
    deps.admit(url, authorization, ip).then(forward, (err: unknown) => {
      if (err instanceof ApiError) return answerError(client, err, requestId);
      log.error({ err }, "websocket upgrade failed");
      answer(
        client,
        500,
        { "content-type": "application/json; charset=utf-8", "x-request-id": requestId },
        Buffer.from(JSON.stringify(internalErrorBody(requestId))),
      );
    });
  });

  // Open sockets would hold the server's close until their clients leave: they are cut.
  app.addHook("preClose", async () => {
    closing = true;
    for (const socket of open) socket.destroy();
  });
}
