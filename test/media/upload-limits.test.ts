// Uploads bounded in memory, number and time (issue 35 §5): a file part sent before the parts that
// name its record is refused unread; a file past MEDIA_MAX_BYTES is refused at the limit, without
// the rest of the body being read; uploads under way are capped per user and per tenant (429 with
// Retry-After), and a stalled one is ended by REQUEST_TIMEOUT_MS, giving its slot back. A malformed
// form (no closing boundary, no boundary at all, a second file, too many fields or parts, a part
// declared application/json that does not parse) is a 400 saying what is wrong, and gives its slot
// back and leaves nothing staged, as a client that goes away.
// The uploads here are written by hand on a TCP socket, so that one can stop half way.
import { randomBytes } from "node:crypto";
import net from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { eventually } from "../events/support.ts";
import { form, type MediaApp, png, startMediaApp } from "./media-setup.ts";

const MB = 1024 * 1024;

interface RawUpload {
  /** Resolves to the answer's status line, headers and body once the server has closed. */
  answer: Promise<{ status: number; headers: Record<string, string>; body: Record<string, unknown> }>;
  /** Bytes of the body written to the socket so far. */
  written(): number;
  /** Writes `n` more bytes of file content (waiting on drain), stopping once an answer came. */
  sendFile(n: number): Promise<void>;
  /** The socket's end (the server closed it, or `destroy`). */
  closed: Promise<void>;
  /** The client goes away. */
  destroy(): void;
}

/**
 * A multipart upload on a raw socket: the request head and the given form parts, then a file part's
 * header; its content is sent by `sendFile`, and the body never ends unless `finish` says so.
 */
function rawUpload(
  app: MediaApp,
  token: { authorization: string },
  parts: Array<[string, string] | "file">,
): RawUpload {
  const url = new URL(app.base);
  const boundary = `----dimensio${randomBytes(8).toString("hex")}`;
  let head = "";
  for (const part of parts) {
    if (part === "file")
      head +=
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.pdf"\r\n` +
        "Content-Type: application/pdf\r\n\r\n%PDF-1.4\n";
    else head += `--${boundary}\r\nContent-Disposition: form-data; name="${part[0]}"\r\n\r\n${part[1]}\r\n`;
  }
  const socket = net.connect(Number(url.port), url.hostname);
  socket.on("error", () => {});
  // A declared length far beyond what is sent: the server cannot take the body for finished.
  socket.write(
    "POST /api/v4/media/upload?source=catalog-1 HTTP/1.1\r\n" +
      `Host: ${url.host}\r\nAuthorization: ${token.authorization}\r\n` +
      `Content-Type: multipart/form-data; boundary=${boundary}\r\nContent-Length: ${1024 * MB}\r\n\r\n`,
  );
  let written = 0;
  const body = Buffer.from(head);
  socket.write(body);
  written += body.length;
  let received = Buffer.alloc(0);
  let answered = false;
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  socket.on("data", (chunk: Buffer) => {
    answered = true;
    received = Buffer.concat([received, chunk]);
  });
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
      status: Number(statusLine.split(" ")[1]),
      headers,
      body: bodyText ? (JSON.parse(bodyText) as Record<string, unknown>) : {},
    };
  });
  const chunk = randomBytes(64 * 1024);
  return {
    answer,
    closed,
    destroy: () => socket.destroy(),
    written: () => written,
    async sendFile(n) {
      let left = n;
      while (left > 0 && !answered && !socket.destroyed) {
        const piece = chunk.subarray(0, Math.min(chunk.length, left));
        left -= piece.length;
        written += piece.length;
        if (!socket.write(piece))
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
      }
    },
  };
}

const NAMING: Array<[string, string]> = [
  ["dimension", "PROD"],
  ["record_id", "P0003"],
  ["field", "IMAGE"],
];

describe("uploads bounded in memory", () => {
  let app: MediaApp;
  beforeAll(async () => {
    app = await startMediaApp({ maxBytes: 1 * MB, users: ["anna"] });
  });
  afterAll(() => app?.close());

  it("a 50 MB file past MEDIA_MAX_BYTES (1 MB) is refused at the limit: 413, the rest of the body not read, the connection closed", async () => {
    const upload = rawUpload(app, app.auth("anna"), [...NAMING, "file"]);
    await upload.sendFile(50 * MB);
    const { status, headers, body } = await upload.answer;
    expect(status).toBe(413);
    expect(body).toMatchObject({ code: "PAYLOAD_TOO_LARGE", status: 413, details: { max_bytes: MB } });
    expect(headers.connection).toBe("close");
    // The answer came after about 1 MB: what the socket buffers held beyond it is all that was sent.
    expect(upload.written()).toBeGreaterThan(MB);
    expect(upload.written()).toBeLessThan(20 * MB);
    expect(await app.t.services.media.list("staging/")).toEqual([]);
  });

  it("a 50 MB file before the parts naming its record is refused unread: 400, nothing stored, the connection closed", async () => {
    const upload = rawUpload(app, app.auth("anna"), [["dimension", "PROD"], "file"]);
    await upload.sendFile(50 * MB);
    const { status, headers, body } = await upload.answer;
    expect(status).toBe(400);
    expect(body).toMatchObject({
      code: "INVALID_REQUEST",
      field: "record_id",
      details: { missing: ["record_id", "field"] },
      message:
        "Send the parts dimension, record_id, field before the part file (missing before it: record_id, field).",
    });
    expect(headers.connection).toBe("close");
    expect(upload.written()).toBeLessThan(20 * MB);
    expect(await app.t.services.media.list("staging/")).toEqual([]);
    const record = await (await app.get("anna", "/api/v4/core/PROD/P0003?source=catalog-1")).json();
    expect(record.data.IMAGE ?? null).toBeNull();
  });
});

describe("uploads capped per user and per tenant, and bounded in time", () => {
  let app: MediaApp;
  beforeAll(async () => {
    app = await startMediaApp({
      maxBytes: 4 * MB,
      users: ["anna", "marco", "greta"],
      env: { MEDIA_UPLOADS_PER_USER: "1", MEDIA_UPLOADS_PER_TENANT: "1", REQUEST_TIMEOUT_MS: "2000" },
    });
  });
  afterAll(() => app?.close());

  it("while a stalled upload holds the slots: 429 for the user and the tenant, another tenant goes on; the stall ends with a 408 and the slots come back", async () => {
    const stalled = rawUpload(app, app.auth("anna"), [...NAMING, "file"]);
    await stalled.sendFile(100 * 1024);
    // The stalled upload is under way: its file streams to staging.
    await eventually(async () => (await app.t.services.media.list("staging/")).length === 1, {
      what: "the stalled upload's staged file",
    });
    const image = await png(16, 16);
    const parts = () =>
      form([
        ["dimension", "PROD"],
        ["record_id", "P0001"],
        ["field", "IMAGE"],
        ["file", { bytes: image, name: "p.png" }],
      ]);
    const sameUser = await app.upload("anna", parts());
    expect(sameUser.status).toBe(429);
    expect(sameUser.headers.get("retry-after")).toBe("1");
    expect(await sameUser.json()).toMatchObject({
      error: "RateLimitExceeded",
      code: "TOO_MANY_UPLOADS",
      status: 429,
      retry_after: 1,
      details: { max_per_user: 1 },
    });
    const sameTenant = await app.upload("marco", parts());
    expect(sameTenant.status).toBe(429);
    expect(await sameTenant.json()).toMatchObject({
      code: "TOO_MANY_UPLOADS",
      details: { max_per_tenant: 1 },
    });
    // Another tenant's upload is not held back by acme's (P0001 is not globex's record: 404).
    const otherTenant = await app.upload("greta", parts());
    expect([otherTenant.status, ((await otherTenant.json()) as { code: string }).code]).toEqual([
      404,
      "RECORD_NOT_FOUND",
    ]);

    // REQUEST_TIMEOUT_MS ends the stalled upload: 408, its staged file removed, its slot given back.
    const { status, body } = await stalled.answer;
    expect(status).toBe(408);
    expect(body).toMatchObject({ status: 408 });
    await eventually(async () => (await app.t.services.media.list("staging/")).length === 0, {
      what: "the stalled upload's staged file removed",
    });
    // The slot is given back as the refused upload's handler ends, which may come just after its
    // staged file is removed and the 408 is written.
    const after = await eventually(
      async () => {
        const res = await app.upload("anna", parts());
        return res.status === 429 ? false : res;
      },
      { what: "the slots given back" },
    );
    expect(after.status).toBe(201);
  }, 30_000);
});

/** The answer to a request sent whole on a socket (`Connection: close`), read once the server closes. */
function exchange(
  app: MediaApp,
  token: { authorization: string },
  contentType: string,
  body: Buffer,
): Promise<{ status: number; body: Record<string, unknown> }> {
  const url = new URL(app.base);
  const socket = net.connect(Number(url.port), url.hostname);
  socket.on("error", () => {});
  let received = Buffer.alloc(0);
  socket.on("data", (chunk: Buffer) => {
    received = Buffer.concat([received, chunk]);
  });
  socket.write(
    "POST /api/v4/media/upload?source=catalog-1 HTTP/1.1\r\n" +
      `Host: ${url.host}\r\nAuthorization: ${token.authorization}\r\nConnection: close\r\n` +
      `Content-Type: ${contentType}\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  socket.write(body);
  return new Promise((resolve) =>
    socket.on("close", () => {
      const text = received.toString("utf8");
      const at = text.indexOf("\r\n\r\n");
      resolve({
        status: Number(text.slice(0, at).split(" ")[1]),
        body: at < 0 ? {} : (JSON.parse(text.slice(at + 4)) as Record<string, unknown>),
      });
    }),
  );
}

/** A multipart body by hand: the form fields, then a file part, with or without the closing line. */
function multipartBody(
  boundary: string,
  fields: Array<[string, string]>,
  file: Buffer | null,
  close: boolean,
): Buffer {
  const parts = fields.map(
    ([name, value]) => `--${boundary}\r\nContent-Disposition: form-data; name="${name}"\r\n\r\n${value}\r\n`,
  );
  return Buffer.concat([
    Buffer.from(parts.join("")),
    ...(file
      ? [
          Buffer.from(
            `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.pdf"\r\n` +
              "Content-Type: application/pdf\r\n\r\n",
          ),
          file,
          Buffer.from("\r\n"),
        ]
      : []),
    Buffer.from(close ? `--${boundary}--\r\n` : ""),
  ]);
}

describe("malformed upload forms: 400 saying what is wrong, the slot given back, nothing staged", () => {
  let app: MediaApp;
  const pdf = Buffer.concat([Buffer.from("%PDF-1.4\n"), randomBytes(2000)]);
  const upload = () => app.upload("anna", form([...NAMING, ["file", { bytes: pdf, name: "s.pdf" }]]));
  beforeAll(async () => {
    // One upload at a time per user: one whose slot is not given back blocks the next (429). The
    // request timeout stays the default 30 s: the answers below come when the body ends.
    app = await startMediaApp({ maxBytes: 1 * MB, users: ["anna"], env: { MEDIA_UPLOADS_PER_USER: "1" } });
  });
  afterAll(() => app?.close());

  it("a body of its Content-Length without the closing boundary: 400 once it has ended, nothing staged, the slot back", async () => {
    const body = multipartBody("XX", NAMING, pdf, false);
    // More than the one slot: a slot held by the first would make the second a 429.
    for (let i = 0; i < 3; i++) {
      const answer = await exchange(app, app.auth("anna"), "multipart/form-data; boundary=XX", body);
      expect(answer).toMatchObject({
        status: 400,
        body: {
          error: "BadRequest",
          code: "INVALID_REQUEST",
          status: 400,
          message:
            "The multipart body ended without its closing boundary line (--<boundary>--); send the whole form.",
        },
      });
    }
    expect(await app.t.services.media.list("staging/")).toEqual([]);
    expect((await upload()).status).toBe(201);
  }, 20_000);

  it("a client gone mid-upload, while it is authorized or while its file is staged, gives its slot back and leaves nothing staged", async () => {
    const slotBack = () =>
      eventually(
        async () => {
          const res = await upload();
          return res.status === 429 ? false : res;
        },
        { what: "the slot given back" },
      );
    // Gone as soon as its parts and the start of its file are sent: the part is destroyed while the
    // upload is authorized, before its file streams to staging.
    const url = new URL(app.base);
    const socket = net.connect(Number(url.port), url.hostname);
    socket.on("error", () => {});
    const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
    const body = multipartBody("XX", NAMING, pdf.subarray(0, 100), false).subarray(0, -2);
    socket.write(
      "POST /api/v4/media/upload?source=catalog-1 HTTP/1.1\r\n" +
        `Host: ${url.host}\r\nAuthorization: ${app.auth("anna").authorization}\r\n` +
        `Content-Type: multipart/form-data; boundary=XX\r\nContent-Length: ${MB}\r\n\r\n`,
    );
    socket.write(body, () => socket.destroy());
    await closed;
    expect((await slotBack()).status).toBe(201);
    expect(await app.t.services.media.list("staging/")).toEqual([]);

    // Gone while its file streams to staging.
    const stalled = rawUpload(app, app.auth("anna"), [...NAMING, "file"]);
    await stalled.sendFile(100 * 1024);
    await eventually(async () => (await app.t.services.media.list("staging/")).length === 1, {
      what: "the upload's staged file",
    });
    expect((await upload()).status).toBe(429);
    stalled.destroy();
    await stalled.closed;
    await eventually(async () => (await app.t.services.media.list("staging/")).length === 0, {
      what: "the staged file removed",
    });
    expect((await slotBack()).status).toBe(201);
  });

  it("a multipart Content-Type without a boundary, or a body without one: 400, not 500", async () => {
    const noBoundary = await exchange(app, app.auth("anna"), "multipart/form-data", Buffer.from("garbage"));
    expect(noBoundary).toMatchObject({
      status: 400,
      body: {
        code: "INVALID_REQUEST",
        message:
          "The Content-Type multipart/form-data names no boundary; send multipart/form-data; boundary=<boundary>.",
      },
    });
    const garbage = await exchange(
      app,
      app.auth("anna"),
      "multipart/form-data; boundary=XX",
      Buffer.from("garbage--XX--"),
    );
    expect(garbage).toMatchObject({
      status: 400,
      body: {
        code: "INVALID_REQUEST",
        message:
          "The multipart body ended without its closing boundary line (--<boundary>--); send the whole form.",
      },
    });
    expect(await app.t.services.media.list("staging/")).toEqual([]);
  });

  it("two files, parts the form does not have, or more parts than it has: 400 naming the problem, not 413", async () => {
    const read = async () =>
      (await (await app.get("anna", "/api/v4/core/PROD/P0003?source=catalog-1")).json()).data.IMAGE;
    const before = await read();
    const twoFiles = await app.upload(
      "anna",
      form([...NAMING, ["file", { bytes: pdf, name: "a.pdf" }], ["file", { bytes: pdf, name: "b.pdf" }]]),
    );
    expect(twoFiles.status).toBe(400);
    expect(await twoFiles.json()).toMatchObject({
      code: "INVALID_REQUEST",
      field: "file",
      message: "Send exactly one file, in the part named file.",
    });
    const extra = Array.from({ length: 12 }, (_, i): [string, string] => [`extra${i}`, "x"]);
    const manyFields = await app.upload(
      "anna",
      form([...NAMING, ...extra, ["file", { bytes: pdf, name: "a.pdf" }]]),
    );
    // The first part the form does not have is refused, naming it, before the field limit is met.
    expect(manyFields.status).toBe(400);
    expect(await manyFields.json()).toMatchObject({
      code: "INVALID_PARAMETER",
      field: "extra0",
      message:
        "The part extra0 is not taken by an upload, whose form has the parts dimension, record_id, field, public, source, center_dett, then file.",
    });
    // Parts that are no form field (not form-data) count as parts only.
    const skipped = "--XX\r\nContent-Disposition: inline\r\n\r\nx\r\n".repeat(12);
    const manyParts = await exchange(
      app,
      app.auth("anna"),
      "multipart/form-data; boundary=XX",
      Buffer.concat([Buffer.from(skipped), multipartBody("XX", NAMING, pdf, true)]),
    );
    expect(manyParts).toMatchObject({
      status: 400,
      body: {
        code: "INVALID_REQUEST",
        details: { max_parts: 12 },
        message:
          "The form has more than 12 parts; send only the parts dimension, record_id, field, public, source, center_dett, then file.",
      },
    });
    expect(await app.t.services.media.list("staging/")).toEqual([]);
    expect(await read()).toEqual(before);
  });

  it("a part declared application/json that does not parse: 400 INVALID_JSON naming it (before the file: unread), not 406; one that parses is taken", async () => {
    const read = async () =>
      (await (await app.get("anna", "/api/v4/core/PROD/P0003?source=catalog-1")).json()).data.IMAGE;
    const before = await read();
    const part = (name: string, value: string, type?: string) =>
      `--XX\r\nContent-Disposition: form-data; name="${name}"\r\n${type ? `Content-Type: ${type}\r\n` : ""}\r\n${value}\r\n`;
    const file = Buffer.concat([
      Buffer.from(
        '--XX\r\nContent-Disposition: form-data; name="file"; filename="f.pdf"\r\nContent-Type: application/pdf\r\n\r\n',
      ),
      pdf,
      Buffer.from("\r\n"),
    ]);
    const send = (head: string, tail: string) =>
      exchange(
        app,
        app.auth("anna"),
        "multipart/form-data; boundary=XX",
        Buffer.concat([Buffer.from(head), file, Buffer.from(`${tail}--XX--\r\n`)]),
      );
    const invalid = (field: string) => ({
      status: 400,
      body: {
        error: "BadRequest",
        code: "INVALID_JSON",
        status: 400,
        field,
        message: `The part ${field} is declared Content-Type: application/json but is not valid JSON (a value over 1000 bytes never is); send valid JSON, or the value as text/plain.`,
      },
    });
    // Before the file: refused when the file part comes, its bytes unread.
    const first = await send(
      part("dimension", "PROD") + part("record_id", '{"P0003"', "application/json") + part("field", "IMAGE"),
      "",
    );
    expect(first).toMatchObject(invalid("record_id"));
    // After the file: refused once the form has ended, the staged file removed.
    const last = await send(
      part("dimension", "PROD") + part("record_id", "P0003") + part("field", "IMAGE"),
      part("public", "tru", "application/json"),
    );
    expect(last).toMatchObject(invalid("public"));
    expect(await app.t.services.media.list("staging/")).toEqual([]);
    expect(await read()).toEqual(before);
    // Valid JSON is taken as its value.
    const valid = await send(
      part("dimension", "PROD") +
        part("record_id", '"P0003"', "application/json; charset=utf-8") +
        part("field", "IMAGE"),
      "",
    );
    expect(valid.status).toBe(201);
    expect(await read()).not.toEqual(before);
  });

  it("a form field longer than 1,000 bytes is refused, not cut short and taken as another value", async () => {
    const long = await app.upload(
      "anna",
      form([
        ["dimension", "PROD"],
        ["record_id", `P0003${"x".repeat(1200)}`],
        ["field", "IMAGE"],
        ["file", { bytes: pdf, name: "a.pdf" }],
      ]),
    );
    expect(long.status).toBe(400);
    expect(await long.json()).toMatchObject({
      code: "INVALID_REQUEST",
      field: "record_id",
      details: { max_bytes: 1000 },
    });
    expect(await app.t.services.media.list("staging/")).toEqual([]);
  });
});
