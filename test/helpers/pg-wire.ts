// A TCP proxy in front of PostgreSQL that counts the statements its clients send: every simple
// Query ('Q') and every Execute ('E') of the extended protocol, on every connection (the pool,
// Prisma's pool, the listening connection). Reads the frontend protocol only; bytes pass unchanged.
import net from "node:net";

const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;

export interface CountedStatement {
  at: number;
  type: "Q" | "E";
  /** The SQL (of an Execute: the statement it binds, when the proxy saw it parsed). */
  text: string | null;
}

export async function pgStatementCounter(host: string, port: number) {
  const statements: CountedStatement[] = [];
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(port, host);
    sockets.add(client);
    sockets.add(upstream);
    let buffered = Buffer.alloc(0);
    let started = false;
    const parsed = new Map<string, string>();
    let bound: string | null = null;
    const cstrings = (body: Buffer) => body.toString("utf8").split("\0");
    client.on("data", (chunk: Buffer) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        if (!started) {
          if (buffered.length < 8) break;
          const length = buffered.readInt32BE(0);
          if (buffered.length < length) break;
          const code = buffered.readInt32BE(4);
          if (code !== SSL_REQUEST && code !== GSSENC_REQUEST) started = true;
          buffered = buffered.subarray(length);
          continue;
        }
        if (buffered.length < 5) break;
        const type = String.fromCharCode(buffered[0]!);
        const length = buffered.readInt32BE(1);
        if (buffered.length < 1 + length) break;
        if (type === "Q")
          statements.push({
            at: Date.now(),
            type,
            text: buffered.subarray(5, 1 + length - 1).toString("utf8"),
          });
        else if (type === "P") {
          const [name = "", text = ""] = cstrings(buffered.subarray(5, 1 + length));
          parsed.set(name, text);
        } else if (type === "B")
          bound = parsed.get(cstrings(buffered.subarray(5, 1 + length))[1] ?? "") ?? null;
        else if (type === "E") statements.push({ at: Date.now(), type, text: bound });
        buffered = buffered.subarray(1 + length);
      }
      upstream.write(chunk);
    });
    upstream.on("data", (chunk: Buffer) => client.write(chunk));
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on("error", drop).on("close", drop);
    upstream.on("error", drop).on("close", drop);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    port: (server.address() as net.AddressInfo).port,
    statements,
    /** The statements counted from `from` (a Date.now() value) on. */
    since: (from: number) => statements.filter((s) => s.at >= from),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
