// GraphQL over WebSocket (decisions.md §21; issue 38 §1): the `graphql-transport-ws` protocol of the
// `graphql-ws` library on the GraphQL paths, for queries, mutations and subscriptions. Every
// operation runs through the one chain of rules (src/graphql/chain.ts) with yoga's engine, as the
// plain POST does: the same limits, costs, write budget, lanes, masking and subscription guard, on
// the schema of the operation's caller's access profile (src/schema/cache.ts).
//   - Authentication: `connection_init`'s payload `{authorization: "Bearer …"}`, else the upgrade
//     request's Authorization header, verified as an HTTP request's token is (src/auth); every
//     operation verifies it again and spends the user's and tenant's rate-limit windows, as an
//     HTTP request does. A missing, bad or ended token closes the socket with 4401; so do logout,
//     expiry (a timer at the token's `exp`) and a live subscription ended by either.
//   - Sockets per user and per tenant: WS_MAX_SOCKETS_PER_USER, WS_MAX_SOCKETS_PER_TENANT; one
//     more is closed with 4429. Per process: WS_MAX_SOCKETS; one more is closed with 1013.
//   - Backpressure: graphql-ws sends an operation's next result once its last one is written, so a
//     client that does not read holds each of its operations at one unsent result (and the event
//     source's pending events are bounded: SUBSCRIPTION_OVERFLOW). A socket whose unsent bytes pass
//     WS_MAX_BUFFERED_BYTES when a result is due (many operations on one socket) is closed with
//     1013 (try again later), that result not queued.
//   - Heartbeats: a ping every WS_KEEPALIVE_MS; a socket without a pong by the next is terminated.
//   - One event, one serialisation per field set (issue 38 §5): a subscription's result is made
//     into JSON once per event and field set (schema, document, operation and variables) and those
//     bytes sent to every subscriber of that field set; subscribers who see the same fields of the
//     event share its view (src/resolvers/read/events.ts). A result with errors goes the protocol's
//     usual way (onNext).
// Request ids: a socket is `ws-<n>` (n counting the process's sockets) and each operation the
// request `ws-<n>:<operation id>`: the id its caller is authenticated with and its unexpected
// errors are logged with (`asRequest`), as an HTTP request's id.
// A refused operation (limits, costs, budget, caps) answers the protocol's `error` (before it runs)
// or `next` message with the errors in the same shape, codes and extensions as over HTTP.
// A `subscribe` payload nested deeper than a JSON body may be is refused as over HTTP (400
// INVALID_JSON, src/graphql/request-params.ts).
// Persisted operations: a `subscribe` payload's `extensions.persistedQuery` (or `documentId`) is
// resolved by the module the HTTP transports use (src/graphql/persisted.ts), with the same
// refusals; a document sent with its hash is registered once it parsed and validated. The protocol
// requires `query` to be a string: a payload naming a persisted operation by its hash alone sends
// `query: ""`, taken as no document.
import type { IncomingMessage, Server } from "node:http";
import type { Duplex } from "node:stream";
import { isAsyncIterable, type Plugin } from "@envelop/core";
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type FormattedExecutionResult,
  GraphQLError,
  getOperationAST,
  type GraphQLSchema,
} from "graphql";
import type { Context } from "graphql-ws";
import type { Counter } from "prom-client";
import { type Extra, useServer } from "graphql-ws/use/ws";
import { type WebSocket, WebSocketServer } from "ws";
import { AuthenticationError, RateLimitError } from "../errors.ts";
import { forwardedClient, GATEWAY_SECRET_HEADER, secretMatches } from "../gateway/secret.ts";
import type { LaneClient } from "../http/heavy-requests.ts";
import { type TimerAt, timerAt } from "../timer-at.ts";
import type { Caller } from "../types.ts";
import { type ChainContext, chainDocuments, chainExecute, chainSubscribe } from "./chain.ts";
import { asGraphQLError, withCodeAndStatus } from "./errors.ts";
import type { PersistedOperations } from "./persisted.ts";
import { nestedTooDeep, paramsTooDeep } from "./request-params.ts";

/** Close codes of this transport (besides the protocol's own, 44xx of graphql-ws). */
export const WS_CLOSE = {
  /** No, a bad, an expired or an ended token (logout, a deactivated user). */
  unauthorized: 4401,
  /** More sockets of this user or tenant than WS_MAX_SOCKETS_PER_USER or _PER_TENANT, or the rate limit spent. */
  tooMany: 4429,
  /**
   * Try again later: the client does not read its results fast enough (WS_MAX_BUFFERED_BYTES
   * unsent), or the process has WS_MAX_SOCKETS open.
   */
  tooSlow: 1013,
  /** The server shuts down. */
  goingAway: 1001,
} as const;

export interface WebSocketDeps {
  /** The HTTP server whose upgrades to `paths` are taken. */
  server: Server;
  paths: readonly string[];
  chain: Plugin<ChainContext>[];
  /** The schema of the caller's access profile. */
  schema: (caller: Caller) => GraphQLSchema;
  /** An Authorization value as a caller (src/auth/service.ts authenticateBearer). */
  authenticate: (
    authorization: string | undefined,
    clientAddress: string,
    requestId: string,
  ) => Promise<{ caller: Caller; expiresAt: number | null }>;
  /** An operation's context, as the HTTP routes make it. */
  context: (caller: Caller, tokenExpiresAt: number | null, laneClient: LaneClient) => ChainContext;
  /** Persisted operations, resolved as over HTTP. */
  persisted: PersistedOperations;
  limits: {
    maxBufferedBytes: number;
    keepAliveMs: number;
    maxSocketsPerUser: number;
    maxSocketsPerTenant: number;
    /** Authenticated sockets of the process. */
    maxSockets: number;
    maxMessageBytes: number;
  };
  clock: () => Date;
  metrics: { graphqlWsEventResults: Pick<Counter<"by">, "inc"> };
  onError?: (err: unknown) => void;
  /**
   * Runs an operation's work (its execution; its subscription and each step of its stream) as the
   * request `requestId`: the id its unexpected errors are logged with, as an HTTP request's
   * (plugin.ts). Without it the work runs as is.
   */
  asRequest?: <T>(requestId: string, work: () => T) => T;
  /**
   * A backend's gateway secret (ROLE read, write or auth): an upgrade without it is refused, as an
   * HTTP request is (src/gateway/secret.ts), and one with it names its client in X-Forwarded-For.
   */
  gatewaySecret?: string | null;
}

export interface GraphQLWebSocket {
  /** Open sockets (tests, metrics). */
  sockets(): number;
  /** Sockets closed for not reading their results (tests, metrics). */
  dropped(): number;
  /** Closes every socket (1001) and stops taking upgrades. */
  close(): Promise<void>;
}

interface Connection {
  /** `ws-<n>`, n counting this process's sockets: the socket's part of its operations' request ids. */
  id: string;
  /** The client's address, read off the upgrade request. */
  address: string;
  /**
   * The token: `connection_init`'s, else the upgrade request's Authorization header (kept from
   * the upgrade until `connection_init` decides).
   */
  authorization: string | undefined;
  /** Whose socket it is, once authenticated (what the caps count). */
  holder: { userId: string; tenantId: string } | null;
  /** Closes the socket at its token's expiry. */
  expiry: TimerAt | null;
  /** Per operation id: what the heavy lanes watch to notice the operation is gone. */
  operations: Map<string, AbortController>;
}

/** graphql-ws's context of a socket; its `extra.request` is not handed over (onUpgrade): undefined. */
type WsContext = Context<Record<string, unknown> | undefined, Extra>;

/**
 * The error as HTTP serializes it: without the transport-internal extensions (yoga's rule), and with
 * `code` when it has none (yoga's codes of a document that does not parse or validate).
 */
function asSent(
  error: GraphQLError,
  code?: "GRAPHQL_PARSE_FAILED" | "GRAPHQL_VALIDATION_FAILED",
): GraphQLError {
  // A code and a status as every error has over HTTP (the masking's withCodeAndStatus).
  const sent = withCodeAndStatus(error, code);
  const sentExt = sent.extensions;
  if (!("http" in sentExt || "unexpected" in sentExt)) return sent;
  const { http: _http, unexpected: _unexpected, ...extensions } = sentExt;
  return new GraphQLError(sent.message, {
    nodes: sent.nodes,
    source: sent.source,
    positions: sent.positions,
    path: sent.path,
    originalError: sent.originalError,
    extensions,
  });
}

/** yoga's refusal of a document that names no operation to run, or not the one asked for. */
const noOperationToRun = () =>
  new GraphQLError("Could not determine what operation to execute.", {
    extensions: { code: "OPERATION_RESOLUTION_FAILURE" },
  });

/** The characters of a client's operation id kept in the operation's request id. */
const MAX_OPERATION_ID_IN_REQUEST_ID = 64;

/**
 * The request id of operation `id` on `connection`: `ws-<n>:<id>` (the id cut to 64 characters,
 * as the client chose it): the caller's request id, and what the operation's errors are logged with.
 */
function operationRequestId(connection: Connection, id: string): string {
  return `${connection.id}:${id.length > MAX_OPERATION_ID_IN_REQUEST_ID ? id.slice(0, MAX_OPERATION_ID_IN_REQUEST_ID) : id}`;
}

/** The request id of the operation whose arguments these are (its caller's, onSubscribe's). */
const requestIdOf = (args: ExecutionArgs) => (args.contextValue as ChainContext).caller.requestId;

/** A close reason is at most 123 bytes. */
function reason(text: string): string {
  return Buffer.byteLength(text) <= 123 ? text : `${Buffer.from(text).subarray(0, 120).toString()}...`;
}

const AUTH_CODE = /^(TOKEN_|SESSION_)/;

/**
 * The close reason of a socket opened without a token: HTTP's message names the Authorization
 * header, which a browser cannot set on a WebSocket; the token goes in connection_init's payload,
 * under either key onConnect reads (at most 123 bytes, as every close reason).
 */
export const WS_TOKEN_MISSING_REASON =
  'A bearer token is required in connection_init\'s payload: {"authorization": "Bearer <token>"} (or "Authorization").';

function pathOf(request: IncomingMessage): string {
  const url = request.url ?? "/";
  const end = url.indexOf("?");
  const path = end === -1 ? url : url.slice(0, end);
  return path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
}

/** What graphql-ws's adapter does to send a message: nothing once the socket is not open. */
function send(socket: WebSocket, data: string): Promise<void> {
  return new Promise((resolve, reject) => {
    if (socket.readyState !== socket.OPEN) return resolve();
    socket.send(data, (err) => (err ? reject(err) : resolve()));
  });
}

/** A number per object (a schema, a document) while it lives. */
function objectIds() {
  const ids = new WeakMap<object, number>();
  let last = 0;
  return (o: object) => {
    let id = ids.get(o);
    if (id === undefined) {
      id = ++last;
      ids.set(o, id);
    }
    return id;
  };
}

/** Open sockets per key (a user, a tenant); a key without any is not kept. */
function socketCounts() {
  const counts = new Map<string, number>();
  return {
    of: (key: string) => counts.get(key) ?? 0,
    add: (key: string) => counts.set(key, (counts.get(key) ?? 0) + 1),
    remove(key: string) {
      const n = (counts.get(key) ?? 1) - 1;
      if (n > 0) counts.set(key, n);
      else counts.delete(key);
    },
  };
}

/** The body a backend refuses an upgrade without the gateway's secret with (as its HTTP 403). */
const GATEWAY_REQUIRED_BODY = JSON.stringify({
  error: "PermissionDenied",
  message:
    "This backend answers requests from the gateway only: send requests to the gateway (it adds the x-gateway-secret header), or set the same GATEWAY_SECRET on both.",
  code: "GATEWAY_REQUIRED",
  status: 403,
});

/** An HTTP answer written on an upgrade's socket (no HTTP response object there), then closed. */
function refusedUpgrade(status: number, body: string): string {
  const reason = status === 403 ? "Forbidden" : "Error";
  return `HTTP/1.1 ${status} ${reason}\r\nConnection: close\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
}

export function attachGraphQLWebSocket(deps: WebSocketDeps): GraphQLWebSocket {
  const { limits } = deps;
  // Documents, queries and mutations, and subscriptions by the chain's runners of its hooks.
  const documents = chainDocuments(deps.chain);
  const execute = chainExecute(deps.chain);
  const subscribe = chainSubscribe(deps.chain);
  const idOf = objectIds();
  /** Per event (the subscription field's value), its results' JSON per field set. */
  const serialised = new WeakMap<object, Map<string, string>>();
  const connections = new WeakMap<WebSocket, Connection>();
  // Authenticated sockets, per user, per tenant and in all (the caps of onConnect).
  const perUser = socketCounts();
  const perTenant = socketCounts();
  let socketsOpen = 0;
  let socketCount = 0;
  const asRequest = deps.asRequest ?? (<T>(_requestId: string, work: () => T) => work());
  let dropped = 0;

  const wss = new WebSocketServer({ noServer: true, maxPayload: limits.maxMessageBytes });

  const connectionOf = (socket: WebSocket): Connection => {
    let c = connections.get(socket);
    if (!c) {
      c = {
        id: `ws-${++socketCount}`,
        address: "",
        authorization: undefined,
        holder: null,
        expiry: null,
        operations: new Map(),
      };
      connections.set(socket, c);
    }
    return c;
  };

  const clientAddress = (ctx: WsContext) => connectionOf(ctx.extra.socket).address;

  /** Closes the socket with the code a refusal of authentication or rate limits means. */
  function refuse(socket: WebSocket, err: unknown): boolean {
    if (err instanceof AuthenticationError) {
      socket.close(WS_CLOSE.unauthorized, reason(err.message));
      return true;
    }
    if (err instanceof RateLimitError) {
      socket.close(WS_CLOSE.tooMany, reason(err.message));
      return true;
    }
    return false;
  }

  const disposable = useServer<Record<string, unknown> | undefined, Record<PropertyKey, never>>(
    {
      async onConnect(ctx) {
        const socket = ctx.extra.socket;
        const connection = connectionOf(socket);
        const given = ctx.connectionParams?.authorization ?? ctx.connectionParams?.Authorization;
        if (typeof given === "string") connection.authorization = given;
        try {
          const { caller, expiresAt } = await deps.authenticate(
            connection.authorization,
            clientAddress(ctx),
            connection.id,
          );
          const userId = caller.principal.userId;
          if (perUser.of(userId) >= limits.maxSocketsPerUser) {
            socket.close(
              WS_CLOSE.tooMany,
              `This user has ${limits.maxSocketsPerUser} GraphQL sockets open already.`,
            );
            return false;
          }
          const tenantId = caller.principal.tenantId;
          if (perTenant.of(tenantId) >= limits.maxSocketsPerTenant) {
            socket.close(
              WS_CLOSE.tooMany,
              `This tenant has ${limits.maxSocketsPerTenant} GraphQL sockets open already.`,
            );
            return false;
          }
          if (socketsOpen >= limits.maxSockets) {
            socket.close(
              WS_CLOSE.tooSlow,
              "The server has as many GraphQL sockets open as it takes; try again later.",
            );
            return false;
          }
          perUser.add(userId);
          perTenant.add(tenantId);
          socketsOpen++;
          connection.holder = { userId, tenantId };
          if (expiresAt !== null) {
            connection.expiry = timerAt(expiresAt * 1000, deps.clock, () =>
              socket.close(WS_CLOSE.unauthorized, "The token of this connection has expired."),
            );
          }
          return true;
        } catch (err) {
          if (
            err instanceof AuthenticationError &&
            err.code === "TOKEN_MISSING" &&
            !connection.authorization?.trim()
          ) {
            socket.close(WS_CLOSE.unauthorized, WS_TOKEN_MISSING_REASON);
            return false;
          }
          if (!refuse(socket, err)) {
            deps.onError?.(err);
            socket.close(1011, "Authentication failed.");
          }
          return false;
        }
      },
      async onSubscribe(ctx, id, payload) {
        // The payload is a request's parameters: nested at most as a JSON body (as over HTTP),
        // before anything recursive (coercion, resolvers, JSON.stringify) reads its variables.
        if (paramsTooDeep(payload))
          return [asSent(asGraphQLError(nestedTooDeep("the subscribe message's payload")))];
        const socket = ctx.extra.socket;
        const connection = connectionOf(socket);
        // Each operation is a request: its token still holds, it spends the rate-limit windows.
        let authenticated: { caller: Caller; expiresAt: number | null };
        try {
          authenticated = await deps.authenticate(
            connection.authorization,
            clientAddress(ctx),
            operationRequestId(connection, id),
          );
        } catch (err) {
          if (refuse(socket, err)) return [];
          return [asSent(asGraphQLError(err))];
        }
        // query, extensions and a `documentId` beside them (persisted.ts reads the payload's).
        const resolved = deps.persisted.resolve(authenticated.caller.principal.tenantId, payload);
        if (resolved.error) return [asSent(resolved.error)];
        // What the heavy lanes watch: aborted when the operation or its socket ends.
        const ending = new AbortController();
        connection.operations.set(id, ending);
        // The context holds the tenant's database (decisions.md §18): a profile that is not
        // reachable refuses the operation (503 DATABASE_UNAVAILABLE), not the socket.
        let contextValue: ReturnType<typeof deps.context>;
        try {
          contextValue = deps.context(authenticated.caller, authenticated.expiresAt, { gone: ending.signal });
        } catch (err) {
          connection.operations.delete(id);
          return [asSent(asGraphQLError(err))];
        }
        const schema = deps.schema(authenticated.caller);
        let document: DocumentNode;
        try {
          // A hash resolves to its document or to a refusal, never to no document.
          document = documents.parse(contextValue, resolved.query ?? "");
        } catch (err) {
          return [asSent(asGraphQLError(err), "GRAPHQL_PARSE_FAILED")];
        }
        // As yoga over HTTP, once parsed: a document without the operation to run is refused.
        const operation = getOperationAST(document, payload.operationName ?? undefined);
        if (!operation) return [asSent(noOperationToRun())];
        const errors = documents.validate(contextValue, schema, document);
        if (errors.length) return errors.map((e: GraphQLError) => asSent(e, "GRAPHQL_VALIDATION_FAILED"));
        // Parsed and validated: a document sent with its hash is registered (persisted.ts).
        resolved.register?.();
        return {
          schema,
          document,
          operationName: payload.operationName ?? undefined,
          variableValues: payload.variables ?? undefined,
          contextValue,
        } satisfies ExecutionArgs;
      },
      // Run as the operation's request (its caller's request id), for what they log.
      execute: (args) => asRequest(requestIdOf(args), () => execute(args)) as never,
      subscribe: (args) => asRequest(requestIdOf(args), () => subscribe(args)) as never,
      onOperation(ctx, id, _payload, args, result) {
        if (!isAsyncIterable(result)) return;
        // What a subscription's results depend on besides the event.
        const fieldSet = `${idOf(args.schema)}:${idOf(args.document)}:${args.operationName ?? ""}:${JSON.stringify(args.variableValues ?? null)}`;
        // graphql-ws types its results with incremental delivery's fields; a subscription's are plain.
        const results = result as AsyncIterable<ExecutionResult>;
        return sendingShared(results, ctx.extra.socket, id, args.contextValue as ChainContext, fieldSet);
      },
      onNext(ctx, _id, _payload, _args, result) {
        const socket = ctx.extra.socket;
        if (tooSlow(socket)) return;
        const errors = result.errors?.map((e) => asSent(e instanceof GraphQLError ? e : asGraphQLError(e)));
        const ended = errors?.find((e) => AUTH_CODE.test(String(e.extensions?.code ?? "")));
        // A subscription ended by logout or expiry: its error goes out, then the socket closes.
        if (ended) setImmediate(() => socket.close(WS_CLOSE.unauthorized, reason(ended.message)));
        const formatted = { ...result, errors: errors?.map((e) => e.toJSON()) } as FormattedExecutionResult;
        if (!formatted.errors) delete formatted.errors;
        return formatted;
      },
      onComplete(ctx, id) {
        const connection = connectionOf(ctx.extra.socket);
        const ending = connection.operations.get(id);
        connection.operations.delete(id);
        ending?.abort(new Error("the operation ended"));
      },
      onClose(ctx) {
        const connection = connectionOf(ctx.extra.socket);
        connection.expiry?.cancel();
        for (const ending of connection.operations.values()) ending.abort(new Error("the socket closed"));
        connection.operations.clear();
        if (connection.holder) {
          perUser.remove(connection.holder.userId);
          perTenant.remove(connection.holder.tenantId);
          socketsOpen--;
          connection.holder = null;
        }
      },
    },
    wss,
    limits.keepAliveMs > 0 ? limits.keepAliveMs : Number.POSITIVE_INFINITY,
  );

  /** Whether the socket holds more unsent bytes than WS_MAX_BUFFERED_BYTES. */
  const overBound = (socket: WebSocket) => socket.bufferedAmount > limits.maxBufferedBytes;

  /** Whether the socket has more unsent than it may: it is closed (1013), the result not sent. */
  function tooSlow(socket: WebSocket): boolean {
    if (!overBound(socket)) return false;
    if (socket.readyState === socket.OPEN) dropped++;
    socket.close(WS_CLOSE.tooSlow, "The client does not read its results fast enough.");
    return true;
  }

  /** The JSON of a result without errors of `context`'s current event, made once per field set. */
  function sharedJson(result: ExecutionResult, context: ChainContext, fieldSet: string): string | null {
    const event = context.currentEvent;
    context.currentEvent = undefined;
    if (!event || result.errors !== undefined || result.extensions !== undefined) return null;
    let bySet = serialised.get(event);
    if (!bySet) {
      bySet = new Map();
      serialised.set(event, bySet);
    }
    let json = bySet.get(fieldSet);
    if (json === undefined) {
      json = JSON.stringify(result);
      bySet.set(fieldSet, json);
      deps.metrics.graphqlWsEventResults.inc({ by: "serialised" });
    } else deps.metrics.graphqlWsEventResults.inc({ by: "shared" });
    return json;
  }

  /**
   * A subscription's results as graphql-ws iterates them, those of an event sent here as the
   * protocol's `next` message around their shared JSON; any other (with errors, or due when the
   * socket is too slow) is given to graphql-ws to send (onNext). Ending it ends the results' source.
   */
  function sendingShared(
    results: AsyncIterable<ExecutionResult>,
    socket: WebSocket,
    id: string,
    context: ChainContext,
    fieldSet: string,
  ): AsyncIterableIterator<ExecutionResult> {
    const source = results[Symbol.asyncIterator]();
    // Each step (the chain's hooks on an event's result: masking) runs as the operation's request.
    const requestId = context.caller.requestId;
    const pull = () => source.next();
    const head = `{"id":${JSON.stringify(id)},"type":"next","payload":`;
    const iterator: AsyncIterableIterator<ExecutionResult> = {
      async next() {
        for (;;) {
          const step = await asRequest(requestId, pull);
          // Over the bound, graphql-ws's onNext refuses it (tooSlow): one place closes the socket.
          if (step.done || overBound(socket)) return step;
          const json = sharedJson(step.value, context, fieldSet);
          if (json === null) return step;
          await send(socket, `${head}${json}}`);
        }
      },
      return: (value) => source.return?.(value) ?? Promise.resolve({ done: true, value }),
      throw: (err) => source.throw?.(err) ?? Promise.reject(err),
      [Symbol.asyncIterator]: () => iterator,
    };
    return iterator;
  }

  const onUpgrade = (request: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!deps.paths.includes(pathOf(request))) {
      // Another listener may take it; alone, the upgrade is refused.
      if (deps.server.listenerCount("upgrade") === 1) {
        socket.end("HTTP/1.1 404 Not Found\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      }
      return;
    }
    const secret = deps.gatewaySecret;
    let address = request.socket.remoteAddress ?? "";
    if (secret) {
      if (!secretMatches(secret, request.headers[GATEWAY_SECRET_HEADER])) {
        socket.end(refusedUpgrade(403, GATEWAY_REQUIRED_BODY));
        return;
      }
      address = forwardedClient(request.headers["x-forwarded-for"]) ?? address;
    }
    wss.handleUpgrade(request, socket, head, (ws) => {
      const connection = connectionOf(ws);
      connection.address = address;
      connection.authorization = request.headers.authorization;
      // graphql-ws keeps what the connection event hands it as `extra.request` for as long as the
      // socket lives; what the operations need of the upgrade request was read above, and the
      // request, its headers and raw headers (about 2 KB a socket) are left behind. Nothing here
      // reads `extra.request`.
      wss.emit("connection", ws, undefined);
    });
  };
  deps.server.on("upgrade", onUpgrade);
  // Only a WebSocket upgrade to these paths is one: any other request offering an upgrade (h2c
  // from `curl --http2`, Java's HttpClient) is served as the plain HTTP request it also is,
  // instead of reaching the upgrade listener (an empty 404 on every route). Node >= 24.9.
  const upgrading = deps.server as Server & { shouldUpgradeCallback?: (r: IncomingMessage) => boolean };
  const previousUpgradeRule = upgrading.shouldUpgradeCallback;
  upgrading.shouldUpgradeCallback = (r) =>
    String(r.headers.upgrade ?? "").toLowerCase() === "websocket" && deps.paths.includes(pathOf(r));

  return {
    sockets: () => wss.clients.size,
    dropped: () => dropped,
    async close() {
      deps.server.off("upgrade", onUpgrade);
      upgrading.shouldUpgradeCallback = previousUpgradeRule;
      const open = [...wss.clients];
      const closed = Promise.all(
        open.map((s) => new Promise<void>((resolve) => s.once("close", () => resolve()))),
      );
      for (const s of open) s.close(WS_CLOSE.goingAway, "The server is shutting down.");
      // A client that does not answer the close handshake is cut after a second.
      const cut = setTimeout(() => {
        for (const s of open) s.terminate();
      }, 1000);
      await closed;
      clearTimeout(cut);
      await disposable.dispose();
    },
  };
}
