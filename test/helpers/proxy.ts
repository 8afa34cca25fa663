// A TCP proxy the fault tests put between the service and a real server (PostgreSQL, Redis, S3),
// to cut the connections or to make the server go silent on them.
import net from "node:net";

/**
 * A TCP proxy to host:port: `cut()` drops every connection and refuses new ones; `stall()` keeps
 * them open but holds what either side sends (a server that does not answer); `restore()`
 * delivers what was held and goes back to normal.
 */
export async function faultyProxy(host: string, port: number) {
  let mode: "open" | "cut" | "stall" = "open";
  interface Pair {
    client: net.Socket;
    upstream: net.Socket;
    held: { to: net.Socket; data: Buffer }[];
  }
  const pairs = new Set<Pair>();
  let connections = 0;
  const server = net.createServer((client) => {
    if (mode === "cut") return void client.destroy();
    connections++;
    const upstream = net.connect(port, host);
    const pair: Pair = { client, upstream, held: [] };
    pairs.add(pair);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      pairs.delete(pair);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
    const forward = (to: net.Socket) => (data: Buffer) => {
      if (mode === "open") to.write(data);
      else pair.held.push({ to, data });
    };
    client.on("data", forward(upstream));
    upstream.on("data", forward(client));
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const localPort = (server.address() as net.AddressInfo).port;
  return {
    port: localPort,
    /** How many connections it has accepted so far. */
    connections: () => connections,
    cut() {
      mode = "cut";
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      pairs.clear();
    },
    stall() {
      mode = "stall";
    },
    restore() {
      mode = "open";
      for (const p of pairs) for (const h of p.held.splice(0)) h.to.write(h.data);
    },
    async close() {
      mode = "cut";
      for (const p of pairs) {
        p.client.destroy();
        p.upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** `url` (postgres://, amqp://, redis://…) with its host and port those of `proxy` on loopback. */
export function throughProxy(url: string, proxy: { port: number }): string {
  const via = new URL(url);
  via.hostname = "127.0.0.1";
  via.port = String(proxy.port);
  return via.toString();
}
