// An import's body is received into its file before the import takes its turn in its tenant's
// heavy lane (decisions §20; docs/decisions.md, "Export and import"): a slow upload holds no
// turn (another user's export of the tenant goes on meanwhile), an import queued behind another
// has its body read at once (REQUEST_TIMEOUT_MS bounds the upload only, not the wait: before, a
// body waiting unread for more than REQUEST_TIMEOUT_MS was cut with 408), and the wait for the
// turn is bounded on its own (503 IMPORT_TURN_TIMEOUT). Real sockets on loopback: the test holds
// a body unfinished, or a turn, and waits on what the server did (spool files, the lane's gauge).
import { mkdtemp, readdir, rm, stat } from "node:fs/promises";
import http from "node:http";
import net from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../events/support.ts";
import { listenAndLogin, loginOverHttp, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { heavyGauge } from "../robustness/support.ts";

const KB = 1024;

/** The body files under `dir` (a spool's), with their sizes. */
async function spoolFiles(dir: string): Promise<number[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  const files = entries.filter((e) => e.isFile() && e.name.endsWith(".body"));
  // A file removed between the listing and its stat (its request ended) is gone.
  const sizes = await Promise.all(
    files.map((e) =>
      stat(path.join(e.parentPath, e.name)).then(
        (s) => s.size,
        () => null,
      ),
    ),
  );
  return sizes.filter((size) => size !== null);
}

/** `n` NDJSON CUST rows named `${prefix} i`, each line padded with spaces to `width` bytes. */
function paddedRows(prefix: string, n: number, width: number): Buffer {
  const lines = Array.from({ length: n }, (_, i) =>
    JSON.stringify({ NAME: `${prefix} ${i}` }).padEnd(width - 1, " "),
  );
  return Buffer.from(`${lines.join("\n")}\n`);
}

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
  /** When the whole body had been handed to the socket, and when the answer came. */
  sentAt: number;
  answeredAt: number;
}

/** A request by Node's HTTP client (`body` sent at once, with its length), timed. */
function request(base: string, method: string, url: string, token: string, body?: Buffer): Promise<Answer> {
  return new Promise((resolve, reject) => {
    let sentAt = 0;
    const req = http.request(
      `${base}${url}`,
      {
        method,
        agent: false,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body ? { "content-type": "application/x-ndjson", "content-length": body.length } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const json = res.headers["content-type"]?.startsWith("application/json");
          resolve({
            status: res.statusCode ?? 0,
            headers: res.headers,
            body: json ? (JSON.parse(text) as Record<string, unknown>) : { text },
            sentAt,
            answeredAt: Date.now(),
          });
        });
      },
    );
    req.on("error", reject);
    req.on("finish", () => {
      sentAt = Date.now();
    });
    req.end(body);
  });
}

/** A POST on a raw socket announcing `length` bytes, its body written by the test piece by piece. */
function slowPost(port: number, url: string, token: string, type: string, length: number) {
  const socket = net.connect(port, "127.0.0.1");
  socket.on("error", () => {});
  socket.write(
    `POST ${url} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n` +
      `Content-Type: ${type}\r\nContent-Length: ${length}\r\nConnection: close\r\n\r\n`,
  );
  let received = "";
  socket.on("data", (c: Buffer) => {
    received += c.toString("utf8");
  });
  const answer = new Promise<{ status: number; body: Record<string, unknown> }>((resolve) =>
    socket.on("close", () => {
      const [head = "", body = ""] = received.split("\r\n\r\n");
      resolve({
        status: Number(head.split(" ")[1] ?? 0),
        body: body ? (JSON.parse(body) as Record<string, unknown>) : {},
      });
    }),
  );
  return { answer, send: (bytes: Buffer | string) => socket.write(bytes), destroy: () => socket.destroy() };
}

async function startApp(env: Record<string, string>, backend: (typeof BACKENDS)[number] = "pglite") {
  const spool = await mkdtemp(path.join(tmpdir(), "dimensio-import-lanes-"));
  const t: TestApp = await createTestApp(backend, {
    fixture: "sample",
    env: {
      ...UNLIMITED_ENV,
      // Every body of more than 4 KB counts as large (protectedScope's lane for bodies).
      HEAVY_BODY_BYTES: String(4 * KB),
      TENANT_HEAVY_REQUESTS: "1",
      IMPORT_SPOOL_DIR: spool,
      ...env,
    },
  });
  const { base, token } = await listenAndLogin(t.app, "anna", "anna-secret-1");
  const marco = await loginOverHttp(base, "marco", "marco-secret-2");
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
    port: Number(new URL(base).port),
    token,
    marco,
    spool,
    named,
    async close() {
      await t.close();
      await rm(spool, { recursive: true, force: true });
    },
  };
}

describe("an import takes its tenant's heavy lane only once its body is in", () => {
  let app: Awaited<ReturnType<typeof startApp>>;
  beforeAll(async () => {
    app = await startApp({});
  });
  afterAll(async () => {
    await app?.close();
  });

  it("a slow upload holds no turn: another user's export of the tenant is answered while it trickles in", async () => {
    const rows = paddedRows("Trickle", 40, 1 * KB);
    const upload = slowPost(
      app.port,
      "/api/v4/core/CUST/import?source=anag-1",
      app.token,
      "application/x-ndjson",
      rows.length,
    );
    upload.send(rows.subarray(0, 10 * KB));
    // The body is being received: its file holds the bytes sent so far.
    await eventually(async () => (await spoolFiles(app.spool)).some((size) => size >= 10 * KB), {
      what: "the upload's first bytes in its spool file",
    });
    expect(await heavyGauge(app.t, "running")).toBe(0);
    // Before, the upload held the lane and this export waited for the upload's end.
    const exported = await request(app.base, "GET", "/api/v4/core/CUST/export?source=anag-1", app.marco);
    expect(exported.status).toBe(200);
    expect(String(exported.body.text)).toMatch(/^CUST_ID,/);
    upload.send(rows.subarray(10 * KB));
    const { status, body } = await upload.answer;
    expect([status, body]).toEqual([
      200,
      { data: { received: 40, created: 40, updated: 0, unchanged: 0, failed: 0, errors: [] } },
    ]);
    expect(await spoolFiles(app.spool)).toEqual([]);
  });
});

// PostgreSQL: the first import's slow rows (pg_sleep in a trigger) hold its lane for seconds
// while the server goes on; PGlite runs in this process, and its pg_sleep holds the event loop too.
describe.each(BACKENDS.filter((b) => b === "postgres"))(
  "an import queued behind another of its tenant (%s)",
  (backend) => {
    it("has its body received at once and waits for its turn longer than REQUEST_TIMEOUT_MS without a 408", async () => {
      const timeout = 3000;
      const app = await startApp({ REQUEST_TIMEOUT_MS: String(timeout), MAX_BATCH_SIZE: "50" }, backend);
      const db = app.t.services.db;
      // Rows that take 12 ms each to write: the first import holds the lane for about 8 s, more than
      // twice the request timeout.
      await db.exec(`
      CREATE FUNCTION test_slow_row() RETURNS trigger LANGUAGE plpgsql AS $$
        BEGIN PERFORM pg_sleep(0.012); RETURN NEW; END $$;
      CREATE TRIGGER test_slow_row BEFORE INSERT ON "TB_ANAG_CUST00" FOR EACH ROW EXECUTE FUNCTION test_slow_row();`);
      try {
        const url = "/api/v4/core/CUST/import?source=anag-1";
        const first = request(app.base, "POST", url, app.token, paddedRows("First", 700, 100));
        await eventually(async () => (await app.named("First")).length > 0, {
          what: "the first import writing its rows",
          timeoutMs: 20_000,
        });
        expect(await heavyGauge(app.t, "running")).toBe(1);
        // The second: 1 MB sent at once.
        const body = paddedRows("Second", 20, 50 * KB);
        const second = request(app.base, "POST", url, app.token, body);
        // Received whole into its file while the first still holds the turn (before, it was read
        // only once its turn came).
        await eventually(async () => (await spoolFiles(app.spool)).includes(body.length), {
          what: "the second import's whole body in its spool file",
          timeoutMs: 20_000,
        });
        expect(await heavyGauge(app.t, "waiting")).toBe(1);
        expect((await app.named("First")).length).toBeLessThan(700);
        const [one, two] = await Promise.all([first, second]);
        expect([one.status, one.body]).toEqual([
          200,
          { data: { received: 700, created: 700, updated: 0, unchanged: 0, failed: 0, errors: [] } },
        ]);
        expect([two.status, two.body]).toEqual([
          200,
          { data: { received: 20, created: 20, updated: 0, unchanged: 0, failed: 0, errors: [] } },
        ]);
        // The premise: the second waited for its answer longer than the request timeout.
        expect(two.answeredAt - two.sentAt).toBeGreaterThan(timeout);
        expect(await app.named("Second")).toHaveLength(20);
      } finally {
        await app.close();
      }
    }, 90_000);
  },
);

// The turn held by a large request whose statement waits behind a table lock the test takes
// (PostgreSQL): a large body takes its turn once it is received, and keeps it to its answer.
describe.each(BACKENDS.filter((b) => b === "postgres"))("an import's wait for its turn (%s)", (backend) => {
  it("waits at most IMPORT_WRITE_TIMEOUT_MS for its turn: then 503 IMPORT_TURN_TIMEOUT with Retry-After, nothing written, no file left", async () => {
    const app = await startApp({ IMPORT_WRITE_TIMEOUT_MS: "300" }, backend);
    const db = app.t.services.db;
    if (db.kind !== "postgres") throw new Error("PostgreSQL expected");
    const lock = new pg.Client({ connectionString: db.connectionString });
    await lock.connect();
    try {
      await lock.query("BEGIN");
      await lock.query('LOCK TABLE "TB_ANAG_CUST00" IN ACCESS EXCLUSIVE MODE');
      const graphql =
        '{"query":"{ CUST(source: \\"anag-1\\", limit: 1) { data { CUST_ID } } }","variables":{"pad":"' +
        "x".repeat(8 * KB) +
        '"}}';
      const holder = slowPost(app.port, "/graphql", app.token, "application/json", graphql.length);
      holder.send(graphql);
      await eventually(async () => (await heavyGauge(app.t, "running")) === 1, {
        what: "the holder's turn",
      });
      const res = await request(
        app.base,
        "POST",
        "/api/v4/core/CUST/import?source=anag-1",
        app.token,
        paddedRows("Late", 5, 100),
      );
      expect(res.status).toBe(503);
      expect(res.headers["retry-after"]).toBe("30");
      expect(res.body).toMatchObject({
        error: "ServiceUnavailable",
        code: "IMPORT_TURN_TIMEOUT",
        status: 503,
        details: { timeout_ms: 300, received: 0, created: 0 },
      });
      expect(String(res.body.message)).toMatch(/^The import's body was received, but it waited/);
      expect(await spoolFiles(app.spool)).toEqual([]);
      expect(await heavyGauge(app.t, "waiting")).toBe(0);
      // The holder ends; the next import takes the turn.
      await lock.query("ROLLBACK");
      expect((await holder.answer).status).toBe(200);
      expect(await app.named("Late")).toEqual([]);
      const after = await request(
        app.base,
        "POST",
        "/api/v4/core/CUST/import?source=anag-1",
        app.token,
        paddedRows("Later", 2, 100),
      );
      expect([after.status, (after.body.data as { created: number }).created]).toEqual([200, 2]);
    } finally {
      await lock.query("ROLLBACK");
      await lock.end();
      await app.close();
    }
  });
});
