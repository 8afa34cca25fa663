// Import bodies spooled to disk (issue 39 §2, decisions §20): the body is received whole into a
// temporary file within REQUEST_TIMEOUT_MS, then its rows are written from that file within
// IMPORT_WRITE_TIMEOUT_MS; the file is removed whatever the outcome (rows written, a bad row, a
// body too large or too slow, the client gone, the write limit, the server closing). Real HTTP on
// a loopback port: Node's request timeout lives in its HTTP server, which inject does not use.
import { mkdtemp, readdir, rm } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../events/support.ts";
import { listenAndLogin, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";

const MB = 1024 * 1024;
const REQUEST_TIMEOUT_MS = 1000;
const MAX_BATCH = 50;
const MAX_BYTES = 2 * MB;

/**
 * Every body file under `dir`, its subdirectories included: what the spool left behind (a spool
 * directory's owner.json names its process and goes with the directory).
 */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile() && e.name !== "owner.json")
    .map((e) => path.join(e.parentPath, e.name));
}

/** `n` NDJSON rows named `${prefix} ${i}`, each line padded with spaces to `width` bytes. */
function paddedRows(prefix: string, n: number, width = 400): Buffer {
  const lines = Array.from({ length: n }, (_, i) =>
    JSON.stringify({ NAME: `${prefix} ${i}` }).padEnd(width - 1, " "),
  );
  return Buffer.from(`${lines.join("\n")}\n`);
}

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

interface TimedAnswer extends Answer {
  /** When the whole body had been handed to the socket, and when the answer's head came. */
  sentAt: number;
  answeredAt: number;
}

/** POST of `body` (with its Content-Length) by Node's HTTP client, timed. */
function post(base: string, url: string, token: string, type: string, body: Buffer): Promise<TimedAnswer> {
  return new Promise((resolve, reject) => {
    let sentAt = 0;
    const req = http.request(
      `${base}${url}`,
      {
        method: "POST",
        agent: false,
        headers: { authorization: `Bearer ${token}`, "content-type": type, "content-length": body.length },
      },
      (res) => {
        const answeredAt = Date.now();
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers as Record<string, string>,
            body: JSON.parse(Buffer.concat(chunks).toString("utf8")),
            sentAt,
            answeredAt,
          }),
        );
      },
    );
    req.on("error", reject);
    req.on("finish", () => {
      sentAt = Date.now();
    });
    req.end(body);
  });
}

interface RawImport {
  /** The answer once the server closed the connection (status 0 when it wrote nothing). */
  answer: Promise<Answer>;
  /** Writes `bytes` of the body (chunk-framed when the request is chunked), waiting on drain. */
  send(bytes: Buffer): Promise<void>;
  /** Writes rows of `piece` until `total` bytes went or an answer began. */
  sendUntilAnswered(piece: Buffer, total: number): Promise<number>;
  /** Cuts the connection (the client going away). */
  destroy(): void;
}

/**
 * An import on a raw socket, so that a test can stop half way: the head announces `length`
 * bytes, or none (chunked); the body is what `send` writes.
 */
function rawImport(port: number, token: string, length: number | "chunked"): RawImport {
  const socket = net.connect(port, "127.0.0.1");
  socket.on("error", () => {});
  socket.write(
    "POST /api/v4/core/CUST/import?source=anag-1 HTTP/1.1\r\nHost: 127.0.0.1\r\n" +
      `Authorization: Bearer ${token}\r\nContent-Type: application/x-ndjson\r\n` +
      (length === "chunked" ? "Transfer-Encoding: chunked\r\n\r\n" : `Content-Length: ${length}\r\n\r\n`),
  );
  let received = Buffer.alloc(0);
  let answered = false;
  socket.on("data", (chunk: Buffer) => {
    answered = true;
    received = Buffer.concat([received, chunk]);
  });
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  const answer = closed.then(() => {
    const text = received.toString("utf8");
    const [headText = "", bodyText = ""] = text.split("\r\n\r\n");
    const [statusLine = "", ...lines] = headText.split("\r\n");
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const i = line.indexOf(":");
      headers[line.slice(0, i).toLowerCase()] = line.slice(i + 1).trim();
    }
    return {
      status: Number(statusLine.split(" ")[1] ?? 0),
      headers,
      body: bodyText ? (JSON.parse(bodyText) as Record<string, unknown>) : {},
    };
  });
  const send = async (bytes: Buffer) => {
    const framed =
      length === "chunked"
        ? Buffer.concat([Buffer.from(`${bytes.length.toString(16)}\r\n`), bytes, Buffer.from("\r\n")])
        : bytes;
    if (socket.destroyed || socket.write(framed)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        socket.off("drain", done);
        socket.off("close", done);
        socket.off("data", done);
        resolve();
      };
      socket.on("drain", done);
      socket.on("close", done);
      socket.on("data", done);
    });
  };
  return {
    answer,
    send,
    async sendUntilAnswered(piece, total) {
      let sent = 0;
      while (sent < total && !answered && !socket.destroyed) {
        await send(piece);
        sent += piece.length;
      }
      return sent;
    },
    destroy: () => socket.destroy(),
  };
}

/** A sample app on a loopback port with its own spool directory; anna logged in. */
async function startImportApp(backend: (typeof BACKENDS)[number], env: Record<string, string> = {}) {
  const spool = await mkdtemp(path.join(tmpdir(), "dimensio-import-test-"));
  const t: TestApp = await createTestApp(backend, {
    fixture: "sample",
    env: {
      ...UNLIMITED_ENV,
      REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      MAX_BATCH_SIZE: String(MAX_BATCH),
      IMPORT_MAX_BYTES: String(MAX_BYTES),
      IMPORT_SPOOL_DIR: spool,
      ...env,
    },
  });
  const { base, token } = await listenAndLogin(t.app, "anna", "anna-secret-1");
  const port = Number(new URL(base).port);
  const named = async (prefix: string) =>
    (
      await t.services.db.query<{ NAME: string }>(
        `SELECT "NAME" FROM "TB_ANAG_CUST00" WHERE "NAME" LIKE $1 ORDER BY "CUST_ID"`,
        [`${prefix} %`],
      )
    ).rows.map((r) => r.NAME);
  return {
    t,
    base,
    port,
    token,
    spool,
    named,
    importNdjson: (body: Buffer, query = "") =>
      post(base, `/api/v4/core/CUST/import?source=anag-1${query}`, token, "application/x-ndjson", body),
    async close() {
      await t.close();
      await rm(spool, { recursive: true, force: true });
    },
  };
}

describe.each(BACKENDS)("import bodies spooled to disk (%s)", (backend) => {
  let app: Awaited<ReturnType<typeof startImportApp>>;
  beforeAll(async () => {
    app = await startImportApp(backend);
  });
  afterAll(async () => {
    await app?.close();
  });

  it("a body received at once whose rows take longer than REQUEST_TIMEOUT_MS to write: every row written, the counts answered, no file left", async () => {
    // 1 MB, far more than Node buffers before it stops reading a socket nobody reads: before
    // spooling, the body was read at the pace of its rows and REQUEST_TIMEOUT_MS cut it (408).
    // Its own app, with a request timeout (1 s) that receiving 1 MB on loopback meets on any
    // host, and rows that take 12 ms each to write (a trigger the test adds): 250 rows of 4 KB
    // take three times the timeout whatever the host's speed.
    const timeout = 1000;
    const slow = await startImportApp(backend, {
      REQUEST_TIMEOUT_MS: String(timeout),
      MAX_BATCH_SIZE: "100",
    });
    const db = slow.t.services.db;
    await db.exec(`
      CREATE FUNCTION test_slow_row() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(0.012); RETURN NEW; END $$;
      CREATE TRIGGER test_slow_row BEFORE INSERT ON "TB_ANAG_CUST00" FOR EACH ROW EXECUTE FUNCTION test_slow_row();`);
    try {
      const rows = 250;
      const body = paddedRows("Slow", rows, 4096);
      expect(body.length).toBeGreaterThan(900 * 1024);
      const res = await slow.importNdjson(body);
      expect(res.body).toEqual({
        data: { received: rows, created: rows, updated: 0, unchanged: 0, failed: 0, errors: [] },
      });
      expect(res.status).toBe(200);
      // The premise: the rows were written for longer than the request timeout after the body went.
      expect(res.answeredAt - res.sentAt).toBeGreaterThan(timeout);
      const names = await slow.named("Slow");
      expect(names).toHaveLength(rows);
      expect([names[0], names.at(-1)]).toEqual(["Slow 0", `Slow ${rows - 1}`]);
      expect(await filesUnder(slow.spool)).toEqual([]);
    } finally {
      await slow.close();
    }
  }, 90_000);

  it("the OpenAPI document lists the import's answers for the write limit and the server closing", async () => {
    const res = await fetch(`${app.base}/api/v4/openapi.json`, {
      headers: { authorization: `Bearer ${app.token}` },
    });
    const doc = (await res.json()) as {
      paths: Record<string, { post: { responses: Record<string, { description: string }> } }>;
    };
    const responses = doc.paths["/api/v4/core/CUST/import"]!.post.responses;
    expect(responses["503"]!.description).toMatch(/^SERVICE_CLOSING: .*; IMPORT_SPOOL_FULL: /);
    expect(responses["504"]!.description).toMatch(/^IMPORT_WRITE_TIMEOUT/);
  });

  it("a bad row once the body is in: 400 naming it, the batches before it written, no file left", async () => {
    const good = paddedRows("Badrow", MAX_BATCH + 10, 40);
    const res = await app.importNdjson(Buffer.concat([good, Buffer.from('{"NAME":\n')]));
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: "INVALID_JSON",
      status: 400,
      details: { row: MAX_BATCH + 11, created: MAX_BATCH },
    });
    expect(await app.named("Badrow")).toHaveLength(MAX_BATCH);
    expect(await filesUnder(app.spool)).toEqual([]);
  });

  it("a body over IMPORT_MAX_BYTES streamed without a length is 413 at the limit: nothing written, no file left, the connection closed", async () => {
    const upload = rawImport(app.port, app.token, "chunked");
    const sent = await upload.sendUntilAnswered(paddedRows("Huge", 160, 400), 50 * MB);
    const { status, headers, body } = await upload.answer;
    expect(status).toBe(413);
    expect(body).toMatchObject({
      error: "PayloadTooLarge",
      code: "PAYLOAD_TOO_LARGE",
      status: 413,
      details: { max_bytes: MAX_BYTES },
    });
    expect(headers.connection).toBe("close");
    // Refused at the limit: what the sockets buffered beyond it is all that went.
    expect(sent).toBeGreaterThan(MAX_BYTES);
    expect(sent).toBeLessThan(30 * MB);
    expect(await app.named("Huge")).toEqual([]);
    expect(await filesUnder(app.spool)).toEqual([]);
  });

  it("a body past what the process's spool may hold at once (IMPORT_SPOOL_MAX_BYTES) is 503 IMPORT_SPOOL_FULL with Retry-After: nothing written, no file left", async () => {
    const small = await startImportApp(backend, { IMPORT_SPOOL_MAX_BYTES: String(16 * 1024) });
    try {
      const res = await small.importNdjson(paddedRows("Crowded", 100, 400));
      expect(res.status).toBe(503);
      expect(res.headers["retry-after"]).toBe("30");
      expect(res.body).toMatchObject({
        error: "ServiceUnavailable",
        code: "IMPORT_SPOOL_FULL",
        status: 503,
        details: { spool_max_bytes: 16 * 1024 },
      });
      expect(await small.named("Crowded")).toEqual([]);
      expect(await filesUnder(small.spool)).toEqual([]);
      // A body that fits is taken as before.
      const fits = await small.importNdjson(paddedRows("Fits", 10, 400));
      expect([fits.status, fits.body]).toEqual([
        200,
        { data: { received: 10, created: 10, updated: 0, unchanged: 0, failed: 0, errors: [] } },
      ]);
    } finally {
      await small.close();
    }
  });

  it("a body announced over IMPORT_MAX_BYTES is 413 before a byte is spooled", async () => {
    const upload = rawImport(app.port, app.token, MAX_BYTES + 1);
    const { status, headers, body } = await upload.answer;
    expect([status, body.code, headers.connection]).toEqual([413, "PAYLOAD_TOO_LARGE", "close"]);
    expect(await filesUnder(app.spool)).toEqual([]);
  });

  it("a body that arrives slower than REQUEST_TIMEOUT_MS is cut with 408: nothing written, no file left", async () => {
    const upload = rawImport(app.port, app.token, MB);
    await upload.send(paddedRows("Stalled", 100));
    const { status, body } = await upload.answer;
    expect(status).toBe(408);
    expect(body).toEqual({
      error: "RequestTimeout",
      message: "The request did not arrive completely in time.",
      code: "REQUEST_TIMEOUT",
      status: 408,
    });
    await eventually(async () => (await filesUnder(app.spool)).length === 0, {
      what: "the stalled import's file removed",
    });
    expect(await app.named("Stalled")).toEqual([]);
  });

  it("a client that goes away mid-body leaves no file and no rows; the tenant's lane is free again", async () => {
    const upload = rawImport(app.port, app.token, MB);
    await upload.send(paddedRows("Gone", 500));
    // The body is being spooled: its file holds bytes.
    await eventually(async () => (await filesUnder(app.spool)).length === 1, {
      what: "the import's spool file",
    });
    upload.destroy();
    await eventually(async () => (await filesUnder(app.spool)).length === 0, {
      what: "the aborted import's file removed",
    });
    expect(await app.named("Gone")).toEqual([]);
    const after = await app.importNdjson(paddedRows("After", 3, 40));
    expect([after.status, after.body]).toEqual([
      200,
      { data: { received: 3, created: 3, updated: 0, unchanged: 0, failed: 0, errors: [] } },
    ]);
  });

  it("a client that goes away once its body is in does not stop the import: every row written, no file left, the lane free again", async () => {
    const rows = 1000;
    const body = paddedRows("Left", rows, 40);
    const upload = rawImport(app.port, app.token, body.length);
    await upload.send(body);
    await eventually(async () => (await app.named("Left")).length > 0, {
      what: "the import's first batch",
      timeoutMs: 30_000,
    });
    upload.destroy();
    // The premise: the client went away while rows were still to be written.
    expect((await app.named("Left")).length).toBeLessThan(rows);
    await eventually(async () => (await app.named("Left")).length === rows, {
      what: "every row written",
      timeoutMs: 50_000,
    });
    await eventually(async () => (await filesUnder(app.spool)).length === 0, {
      what: "the import's file removed",
    });
    const after = await app.importNdjson(paddedRows("Later", 2, 40));
    expect([after.status, after.body]).toEqual([
      200,
      { data: { received: 2, created: 2, updated: 0, unchanged: 0, failed: 0, errors: [] } },
    ]);
  }, 60_000);
});

describe.each(BACKENDS)("an import's write phase, bounded on its own (%s)", (backend) => {
  it("past IMPORT_WRITE_TIMEOUT_MS the import stops before its next batch: 504 with its counts, the batches written stay, no file left", async () => {
    const app = await startImportApp(backend, { IMPORT_WRITE_TIMEOUT_MS: "200" });
    try {
      const rows = 3000;
      const res = await app.importNdjson(paddedRows("Limited", rows, 40));
      expect(res.status).toBe(504);
      expect(res.body).toMatchObject({
        error: "GatewayTimeout",
        code: "IMPORT_WRITE_TIMEOUT",
        status: 504,
        details: { timeout_ms: 200, failed: 0, updated: 0 },
      });
      const details = res.body.details as { created: number; received: number };
      expect(details.created).toBeGreaterThan(0);
      expect(details.created).toBeLessThan(rows);
      expect(details.created % MAX_BATCH).toBe(0);
      expect(res.body.message).toContain(`The ${details.created} rows written before it stay.`);
      expect(await app.named("Limited")).toHaveLength(details.created);
      expect(await filesUnder(app.spool)).toEqual([]);
    } finally {
      await app.close();
    }
  }, 60_000);

  it("closing the server stops the imports under way: one writing before its next batch, one receiving at once; both 503, the spool directory removed", async () => {
    // Two heavy requests of the tenant at once; a request timeout that does not end the second
    // body before the server closes.
    const app = await startImportApp(backend, { TENANT_HEAVY_REQUESTS: "2", REQUEST_TIMEOUT_MS: "10000" });
    let closed = false;
    try {
      const rows = 4000;
      const writing = app.importNdjson(paddedRows("Closing", rows, 40));
      // The write phase has begun: its first batches are in the database.
      await eventually(async () => (await app.named("Closing")).length > 0, {
        what: "the import's first batch",
        timeoutMs: 30_000,
      });
      // A second import, its body half sent: being received into its file.
      const receiving = rawImport(app.port, app.token, MB);
      await receiving.send(paddedRows("Halfway", 100));
      await eventually(async () => (await filesUnder(app.spool)).length === 2, {
        what: "both imports' files",
      });
      const closing = app.t.app.close();
      const [res, cut] = await Promise.all([writing, receiving.answer]);
      await closing;
      closed = true;
      expect(res.status).toBe(503);
      expect(res.body).toMatchObject({
        error: "ServiceUnavailable",
        code: "SERVICE_CLOSING",
        status: 503,
        details: { failed: 0, updated: 0 },
      });
      const created = (res.body.details as { created: number }).created;
      expect(created).toBeGreaterThan(0);
      expect(created).toBeLessThan(rows);
      expect(res.body.message).toContain(`The ${created} rows written before it stay.`);
      expect(await app.named("Closing")).toHaveLength(created);
      expect([cut.status, cut.body.code, cut.headers.connection]).toEqual([503, "SERVICE_CLOSING", "close"]);
      expect(await app.named("Halfway")).toEqual([]);
      // Nothing of the app's spool is left, its directory included.
      expect(await readdir(app.spool)).toEqual([]);
    } finally {
      if (closed) await app.t.services.close();
      else await app.t.close();
      await rm(app.spool, { recursive: true, force: true });
    }
  }, 60_000);
});
