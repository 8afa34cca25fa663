// A client that goes away mid-request is not an error of the service (issue 35 §6): its cut-off
// body is logged at info ("client closed the request"), not as "request failed" at error level
// (its ECONNRESET used to be taken for a lost database connection: 503 and an error line). A reset
// the service meets while the client still waits stays a 503 logged at error level.
import net from "node:net";
import { Writable } from "node:stream";
import type { FastifyInstance } from "fastify";
import pino from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loadConfig } from "../../src/config.ts";
import { buildHttpServer } from "../../src/http/server.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";

interface LogLine {
  level: number;
  msg: string;
  code?: string;
  err?: { code?: string };
}

describe("client aborts in the log", () => {
  let app: FastifyInstance;
  let port: number;
  const lines: LogLine[] = [];
  const waiters: Array<{ ok: (l: LogLine) => boolean; resolve: (l: LogLine) => void }> = [];
  /** Resolves with the first log line (from now on or already written) that `ok` accepts. */
  const logged = (ok: (l: LogLine) => boolean) =>
    new Promise<LogLine>((resolve) => {
      const seen = lines.find(ok);
      if (seen) resolve(seen);
      else waiters.push({ ok, resolve });
    });

  beforeAll(async () => {
    const destination = new Writable({
      write(chunk, _encoding, done) {
        for (const text of String(chunk).split("\n")) {
          if (!text) continue;
          const line = JSON.parse(text) as LogLine;
          lines.push(line);
          for (const w of waiters.filter((w) => w.ok(line))) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(line);
          }
        }
        done();
      },
    });
    app = await buildHttpServer({
      config: loadConfig({ LOG_LEVEL: "info" }),
      logger: pino({ level: "info" }, destination),
      readiness: async () => ({}),
    });
    app.post("/echo", async (request) => ({ body: request.body }));
    app.get("/reset", async () => {
      throw Object.assign(new Error("read ECONNRESET"), { code: "ECONNRESET" });
    });
    await app.listen({ host: "127.0.0.1", port: 0 });
    port = (app.server.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    await app?.close();
  });

  it("a body cut off by the client is an info line, no error line", async () => {
    const socket = net.connect(port, "127.0.0.1");
    socket.on("error", () => {});
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    // A request has begun once its first line is logged; then the client goes mid-body.
    const begun = logged((l) => l.msg === "incoming request");
    socket.write(
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"a":',
    );
    await begun;
    socket.destroy();
    const line = await logged((l) => l.msg === "client closed the request" || l.msg === "request failed");
    expect(line).toMatchObject({ level: 30, msg: "client closed the request", code: "ECONNRESET" });
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
  });

  it("a reset met while the client still waits is a 503, logged at error level", async () => {
    const res = await app.inject({ method: "GET", url: "/reset" });
    expect(res.statusCode).toBe(503);
    const line = await logged((l) => l.msg === "request failed");
    expect(line).toMatchObject({ level: 50, err: { code: "ECONNRESET" } });
  });
});

describe("client aborts on the GraphQL routes", () => {
  let t: TestApp;
  const lines: LogLine[] = [];
  let wake: () => void = () => {};

  beforeAll(async () => {
    const destination = new Writable({
      write(chunk, _encoding, done) {
        for (const text of String(chunk).split("\n")) if (text) lines.push(JSON.parse(text) as LogLine);
        wake();
        done();
      },
    });
    t = await createTestApp("pglite", { logger: pino({ level: "info" }, destination) });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Resolves with the first log line that `ok` accepts. */
  async function logged(ok: (l: LogLine) => boolean): Promise<LogLine> {
    for (;;) {
      const seen = lines.find(ok);
      if (seen) return seen;
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
    }
  }

  it("a GraphQL body cut off by the client is an info line, no error line", async () => {
    const port = (t.app.server.address() as net.AddressInfo).port;
    const socket = net.connect(port, "127.0.0.1");
    socket.on("error", () => {});
    await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
    socket.write(
      'POST /graphql HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"query":',
    );
    await logged((l) => l.msg === "incoming request");
    socket.destroy();
    const line = await logged(
      (l) => l.msg === "client closed the request" || l.msg === "GraphQL request failed",
    );
    expect(line).toMatchObject({ level: 30, msg: "client closed the request", code: "ECONNRESET" });
    expect(lines.filter((l) => l.level >= 50)).toEqual([]);
  });
});
