// GraphQL over WebSocket for tests: one operation at a time through the real `graphql-ws` client,
// its answer in the bytes HTTP answers with, so that tests compare the transports.
import type { AddressInfo } from "node:net";
import type { FastifyInstance } from "fastify";
import { type Client, createClient, type ExecutionResult } from "graphql-ws";
import WebSocket from "ws";

export interface SocketPayload {
  query: string;
  variables?: Record<string, unknown>;
  operationName?: string;
  extensions?: Record<string, unknown>;
}

export interface SocketAnswer {
  /** The `next` messages' results. */
  results: ExecutionResult[];
  /** The `error` message's errors (refused before it ran), or null when it completed. */
  errors: unknown[] | null;
}

export interface GraphQLSocket {
  run(payload: SocketPayload): Promise<SocketAnswer>;
  /**
   * The answer as the JSON body HTTP answers it with: `{errors}` for a refusal before it ran, else
   * its one result.
   */
  body(payload: SocketPayload): Promise<string>;
  dispose(): Promise<void>;
}

/** Listens on loopback (once) and gives the WebSocket URL of `path`. */
export async function webSocketUrl(app: FastifyInstance, path = "/graphql"): Promise<string> {
  if (!app.server.listening) await app.listen({ host: "127.0.0.1", port: 0 });
  return `ws://127.0.0.1:${(app.server.address() as AddressInfo).port}${path}`;
}

/** A `graphql-ws` client of `url`, authenticated with `token` in connection_init, never retrying. */
export function authenticatedClient(url: string, token: string): Client {
  return createClient({
    url,
    webSocketImpl: WebSocket,
    retryAttempts: 0,
    connectionParams: { authorization: `Bearer ${token}` },
  });
}

/** A socket authenticated with `token` in connection_init; a close fails the operation it ends. */
export function graphqlSocket(url: string, token: string): GraphQLSocket {
  const client = authenticatedClient(url, token);
  const run = (payload: SocketPayload) =>
    new Promise<SocketAnswer>((resolve, reject) => {
      const results: ExecutionResult[] = [];
      client.subscribe(payload, {
        next: (result) => results.push(result as ExecutionResult),
        error: (err) => {
          if (Array.isArray(err)) resolve({ results, errors: err });
          else {
            const closed = err as { code?: number; reason?: string };
            reject(new Error(`the socket closed: ${closed.code} ${closed.reason}`));
          }
        },
        complete: () => resolve({ results, errors: null }),
      });
    });
  return {
    run,
    async body(payload) {
      const answer = await run(payload);
      if (answer.errors) return JSON.stringify({ errors: answer.errors });
      if (answer.results.length !== 1) throw new Error(`${answer.results.length} results, not one`);
      return JSON.stringify(answer.results[0]);
    },
    dispose: () => client.dispose() as Promise<void>,
  };
}
