// GraphQL over WebSocket's backpressure (src/graphql/websocket.ts): a client that stops reading is
// closed with 1013 once WS_MAX_BUFFERED_BYTES of its results are unsent, instead of the server
// queueing every further result in memory (graphql-ws writes an operation's next result once its
// last one is written: eight operations of one socket hold eight unsent). The transport alone, on a loopback server, with a
// schema whose subscription produces large results as fast as it may.
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { GraphQLObjectType, GraphQLSchema, GraphQLString } from "graphql";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { ChainContext } from "../../src/graphql/chain.ts";
import { createPersistedOperations } from "../../src/graphql/persisted.ts";
import { attachGraphQLWebSocket, type GraphQLWebSocket, WS_CLOSE } from "../../src/graphql/websocket.ts";
import type { Caller } from "../../src/types.ts";
import { eventually } from "../events/support.ts";

const CHUNK = "x".repeat(256 * 1024);

const schema = new GraphQLSchema({
  query: new GraphQLObjectType({
    name: "Query",
    fields: { ok: { type: GraphQLString, resolve: () => "ok" } },
  }),
  subscription: new GraphQLObjectType({
    name: "Subscription",
    fields: {
      flood: {
        type: GraphQLString,
        subscribe: async function* () {
          for (;;) {
            await new Promise<void>((resolve) => setImmediate(resolve));
            yield { flood: CHUNK };
          }
        },
      },
    },
  }),
});

const caller = {
  principal: { userId: "u1", tenantId: "t1", sessionId: "s1", peso: 1, grants: [] },
  requestId: "r1",
  now: () => new Date(),
} as unknown as Caller;

describe("GraphQL over WebSocket: backpressure and heartbeats", () => {
  let server: Server | null = null;
  let transport: GraphQLWebSocket | null = null;

  afterEach(async () => {
    await transport?.close();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  });

  function start(keepAliveMs: number): Promise<number> {
    server = createServer();
    transport = attachGraphQLWebSocket({
      server,
      paths: ["/graphql"],
      chain: [],
      schema: () => schema,
      authenticate: async () => ({ caller, expiresAt: null }),
      context: (c, tokenExpiresAt, reply) =>
        ({ caller: c, tokenExpiresAt, reply }) as unknown as ChainContext,
      persisted: createPersistedOperations({
        maxPerTenant: 0,
        maxBytesPerTenant: 0,
        trustedDocuments: null,
        trustedOnly: false,
      }),
      limits: {
        maxBufferedBytes: 1024 * 1024,
        keepAliveMs,
        maxSocketsPerUser: 5,
        maxSocketsPerTenant: 5,
        maxSockets: 5,
        maxMessageBytes: 65536,
      },
      clock: () => new Date(),
      metrics: { graphqlWsEventResults: { inc: () => {} } },
    });
    return new Promise((resolve) =>
      server!.listen(0, "127.0.0.1", () => resolve((server!.address() as AddressInfo).port)),
    );
  }

  it("heartbeats: a client answering pings stays; one that answers none is cut", async () => {
    const port = await start(50);
    const live = new WebSocket(`ws://127.0.0.1:${port}/graphql`, "graphql-transport-ws");
    const mute = new WebSocket(`ws://127.0.0.1:${port}/graphql`, "graphql-transport-ws", { autoPong: false });
    let pings = 0;
    live.on("ping", () => pings++);
    const muteClosed = new Promise<number>((resolve) => mute.on("close", (code) => resolve(code)));
    await eventually(() => transport!.sockets() === 2, { what: "both sockets open" });
    // The mute one is terminated (no close frame: 1006) after a ping without its pong.
    expect(await muteClosed).toBe(1006);
    await eventually(() => pings >= 4, { what: "pings answered by the live client" });
    expect(live.readyState).toBe(WebSocket.OPEN);
    await eventually(() => transport!.sockets() === 1, { what: "the mute socket gone on the server" });
    live.close();
  });

  it("a client that stops reading is closed with 1013 once its unsent results pass the bound", async () => {
    const port = await start(0);

    const client = new WebSocket(`ws://127.0.0.1:${port}/graphql`, "graphql-transport-ws");
    const closed = new Promise<number>((resolve) => client.on("close", (code) => resolve(code)));
    let received = 0;
    const first = new Promise<void>((resolve) => {
      client.on("message", (data) => {
        const message = JSON.parse(String(data));
        if (message.type === "connection_ack") {
          // graphql-ws sends an operation's next result once its last one is written: each
          // operation holds at most one result unsent, the operations of one socket one each.
          for (let id = 1; id <= 8; id++) {
            client.send(
              JSON.stringify({
                id: String(id),
                type: "subscribe",
                payload: { query: "subscription { flood }" },
              }),
            );
          }
        } else if (message.type === "next") {
          received++;
          resolve();
        }
      });
    });
    client.on("open", () => client.send(JSON.stringify({ type: "connection_init", payload: {} })));
    await first;
    // The client stops reading: the server's results pile up in its socket until the bound.
    client.pause();
    await eventually(() => transport!.dropped() === 1, { what: "the slow client dropped" });
    client.resume();
    expect(await closed).toBe(WS_CLOSE.tooSlow);
    expect(received).toBeGreaterThan(0);
    await eventually(() => transport!.sockets() === 0, { what: "the socket gone" });
  });
});
