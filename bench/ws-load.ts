// A load generator for GraphQL over WebSocket (the `graphql-transport-ws` protocol), shaped as
// autocannon's result: `connections` sockets, each authenticated once in connection_init and then
// sending one operation at a time (subscribe, then the next once its `complete` came) for
// `duration` seconds. An operation counts as an error when it answers `error` or a result with
// errors. The protocol is spoken on `ws` directly (as autocannon speaks HTTP), not through the
// graphql-ws client: what is measured is the server.
import WebSocket from "ws";
import type { AutocannonResult } from "./autocannon.ts";

export interface WsLoadOptions {
  url: string;
  token: string;
  query: string;
  variables?: Record<string, unknown>;
  connections: number;
  duration: number;
}

function opened(url: string, token: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, "graphql-transport-ws");
    socket.once("error", reject);
    socket.once("close", (code, reason) => reject(new Error(`closed ${code} ${reason}`)));
    socket.once("open", () =>
      socket.send(JSON.stringify({ type: "connection_init", payload: { authorization: `Bearer ${token}` } })),
    );
    socket.once("message", (data) => {
      const message = JSON.parse(String(data)) as { type: string };
      if (message.type === "connection_ack") resolve(socket);
      else reject(new Error(`connection_init answered ${message.type}`));
    });
  });
}

/** One operation on `socket`: whether it answered without errors. */
function operation(socket: WebSocket, id: string, payload: object): Promise<boolean> {
  return new Promise((resolve, reject) => {
    let ok = true;
    const onClose = (code: number) => reject(new Error(`the socket closed (${code})`));
    const onMessage = (data: WebSocket.RawData) => {
      const message = JSON.parse(String(data)) as {
        id?: string;
        type: string;
        payload?: { errors?: unknown };
      };
      if (message.id !== id) return;
      if (message.type === "next" && message.payload?.errors) ok = false;
      if (message.type === "error") ok = false;
      if (message.type === "complete" || message.type === "error") {
        socket.off("message", onMessage);
        socket.off("close", onClose);
        resolve(ok);
      }
    };
    socket.on("message", onMessage);
    socket.once("close", onClose);
    socket.send(JSON.stringify({ id, type: "subscribe", payload }));
  });
}

export async function wsLoad(opts: WsLoadOptions): Promise<AutocannonResult> {
  const latencies: number[] = [];
  let errors = 0;
  const payload = { query: opts.query, ...(opts.variables ? { variables: opts.variables } : {}) };
  const sockets = await Promise.all(
    Array.from({ length: opts.connections }, () => opened(opts.url, opts.token)),
  );
  const started = performance.now();
  const end = started + opts.duration * 1000;
  await Promise.all(
    sockets.map(async (socket) => {
      for (let n = 1; performance.now() < end; n++) {
        const t0 = performance.now();
        if (!(await operation(socket, String(n), payload))) errors++;
        latencies.push(performance.now() - t0);
      }
      socket.close();
    }),
  );
  const seconds = (performance.now() - started) / 1000;
  latencies.sort((a, b) => a - b);
  const at = (q: number) =>
    Math.round(latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? 0);
  return {
    requests: { average: latencies.length / seconds, total: latencies.length },
    latency: {
      p50: at(0.5),
      p99: at(0.99),
      average: latencies.reduce((a, b) => a + b, 0) / Math.max(1, latencies.length),
    },
    non2xx: 0,
    errors,
  };
}
