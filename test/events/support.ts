// Test instruments for the event side: a consumer on the real RabbitMQ, webhook receivers as real
// HTTP servers on loopback, a TCP proxy whose connections the test can cut, a wait on a condition
// (each with a deadline; no fixed sleeps), and the relay's claim explained.
import { EventEmitter } from "node:events";
import http from "node:http";
import net from "node:net";
import amqplib from "amqplib";
import { RELAY_CLAIM_SQL, RELAY_TURN_LOCK, RELAY_TURN_SQL } from "../../src/events/relay.ts";
import type { Database } from "../../src/types.ts";

/** Resolves once `check` returns a value other than undefined/false; rejects at the deadline. */
export async function eventually<T>(
  check: () => Promise<T | undefined | false> | T | undefined | false,
  { timeoutMs = 15_000, what = "condition" }: { timeoutMs?: number; what?: string } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v as T;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export interface BrokerMessage {
  content: Buffer;
  // biome-ignore lint/suspicious/noExplicitAny: amqplib's properties
  properties: any;
  body: Record<string, unknown>;
  /** performance.now() when it arrived. */
  at: number;
}

/** A queue of the test's own, bound to the exchange, collecting every message. */
export async function brokerConsumer(url: string, exchange: string) {
  const conn = await amqplib.connect(url);
  const ch = await conn.createChannel();
  await ch.assertExchange(exchange, "fanout", { durable: true });
  const q = await ch.assertQueue("", { exclusive: true, autoDelete: true });
  await ch.bindQueue(q.queue, exchange, "");
  const messages: BrokerMessage[] = [];
  const arrived = new EventEmitter();
  await ch.consume(
    q.queue,
    (msg) => {
      if (!msg) return;
      messages.push({
        content: msg.content,
        properties: msg.properties,
        body: JSON.parse(msg.content.toString()),
        at: performance.now(),
      });
      arrived.emit("message");
    },
    { noAck: true },
  );
  return {
    messages,
    /** Resolves when `predicate` holds for the messages so far (checked on every arrival). */
    waitFor(predicate: (m: BrokerMessage[]) => boolean, timeoutMs = 30_000): Promise<void> {
      if (predicate(messages)) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          arrived.off("message", on);
          reject(new Error(`timed out with ${messages.length} messages`));
        }, timeoutMs);
        const on = () => {
          if (!predicate(messages)) return;
          clearTimeout(timer);
          arrived.off("message", on);
          resolve();
        };
        arrived.on("message", on);
      });
    },
    async close() {
      await ch.close().catch(() => {});
      await conn.close().catch(() => {});
    },
  };
}

export interface ReceivedRequest {
  headers: http.IncomingHttpHeaders;
  raw: string;
  // biome-ignore lint/suspicious/noExplicitAny: webhook bodies are inspected freely
  body: any;
  at: number;
}

/** Answer of a receiver to its n-th request (0-based): a status, or "hang" (never answers). */
export type Respond = (n: number, req: ReceivedRequest) => number | "hang" | Promise<number>;

/** A webhook receiver: a real HTTP server on 127.0.0.1. */
export async function webhookReceiver(respond: Respond = () => 200) {
  const requests: ReceivedRequest[] = [];
  const arrived = new EventEmitter();
  const sockets = new Set<net.Socket>();
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      const raw = Buffer.concat(chunks).toString("utf8");
      const r: ReceivedRequest = { headers: req.headers, raw, body: JSON.parse(raw), at: Date.now() };
      const n = requests.length;
      requests.push(r);
      arrived.emit("request");
      const answer = await respond(n, r);
      if (answer === "hang") return;
      res.writeHead(answer, { "content-type": "text/plain" }).end("ok");
    });
  });
  let connections = 0;
  server.on("connection", (s) => {
    connections++;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as net.AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    port,
    requests,
    /** TCP connections accepted so far. */
    connections: () => connections,
    waitFor(count: number, timeoutMs = 20_000): Promise<void> {
      if (requests.length >= count) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          arrived.off("request", on);
          reject(new Error(`timed out with ${requests.length} of ${count} requests`));
        }, timeoutMs);
        const on = () => {
          if (requests.length < count) return;
          clearTimeout(timer);
          arrived.off("request", on);
          resolve();
        };
        arrived.on("request", on);
      });
    },
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A TCP proxy to host:port whose connections can be cut (and refused) and restored. */
export async function tcpProxy(host: string, port: number) {
  const pairs = new Set<net.Socket>();
  let open = true;
  const server = net.createServer((client) => {
    if (!open) return void client.destroy();
    const upstream = net.connect(port, host);
    pairs.add(client);
    pairs.add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(client);
      pairs.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const localPort = (server.address() as net.AddressInfo).port;
  return {
    port: localPort,
    /** Every connection dropped, new ones refused until restore(). */
    cut() {
      open = false;
      for (const s of pairs) s.destroy();
      pairs.clear();
    },
    restore() {
      open = true;
    },
    async close() {
      open = false;
      for (const s of pairs) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A node of EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)'s plan, as far as the tests read it. */
export interface PlanNode {
  "Node Type": string;
  "Index Name"?: string;
  "Actual Rows": number;
  "Shared Hit Blocks": number;
  "Shared Read Blocks": number;
  Plans?: PlanNode[];
}

/**
 * The relay's claim as the relay runs it (in a transaction that took the turn with its settings),
 * explained with the pages it read: run `runs` times in a row, the last run's plan answered.
 * `before`: a statement the transaction runs first (costs a test sets). Settings end with the
 * transaction, as the relay's do.
 */
export async function explainRelayClaim(
  db: Database,
  opts: { runs?: number; before?: string } = {},
): Promise<PlanNode> {
  return db.transaction(async (tx) => {
    if (opts.before) await tx.query(opts.before);
    const turn = await tx.query<{ held: boolean }>(RELAY_TURN_SQL, [RELAY_TURN_LOCK]);
    if (turn.rows[0]?.held !== true) throw new Error("the relays' turn is held elsewhere");
    let plan: PlanNode | undefined;
    for (let i = 0; i < (opts.runs ?? 1); i++) {
      const { rows } = await tx.query<{ "QUERY PLAN": unknown }>(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${RELAY_CLAIM_SQL}`,
        [100],
      );
      const raw = rows[0]!["QUERY PLAN"];
      plan = ((typeof raw === "string" ? JSON.parse(raw) : raw) as [{ Plan: PlanNode }])[0].Plan;
    }
    return plan!;
  });
}
