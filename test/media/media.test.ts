// Media (spec 4.5, decisions.md §13, issue 12) on the local store and on a real S3-compatible
// server (s3rver, started here on loopback): upload, byte-for-byte download, sizes with their pixel
// dimensions, ETag/304, Range, public versus private, limits, tenants, rights, clean-up.
import { randomBytes } from "node:crypto";
import sharp from "sharp";
import zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { recordPrefix } from "../../src/media/keys.ts";
import { eventually } from "../events/support.ts";
import { form, type MediaApp, png, type S3Server, startMediaApp, startS3rver } from "./media-setup.ts";

interface Store {
  name: string;
  s3: boolean;
}

const STORES: Store[] = [
  { name: "local directory", s3: false },
  { name: "S3 (s3rver)", s3: true },
];

let s3: S3Server | null = null;
beforeAll(async () => {
  s3 = await startS3rver();
});
afterAll(() => s3?.close());

/** A PNG that declares width × height in its header (the pixels themselves are not there). */
function declaredPng(width: number, height: number): Buffer {
  const chunk = (type: string, data: Buffer) => {
    const len = Buffer.alloc(4);
    len.writeUInt32BE(data.length);
    const body = Buffer.concat([Buffer.from(type), data]);
    const crc = Buffer.alloc(4);
    crc.writeUInt32BE(zlib.crc32(body) >>> 0);
    return Buffer.concat([len, body, crc]);
  };
  const ihdr = Buffer.alloc(13);
  ihdr.writeUInt32BE(width, 0);
  ihdr.writeUInt32BE(height, 4);
  ihdr[8] = 8;
  ihdr[9] = 2;
  return Buffer.concat([
    Buffer.from([137, 80, 78, 71, 13, 10, 26, 10]),
    chunk("IHDR", ihdr),
    chunk("IDAT", zlib.deflateSync(Buffer.alloc(10))),
    chunk("IEND", Buffer.alloc(0)),
  ]);
}

describe.each(STORES)("media ($name)", (store) => {
  let app: MediaApp;
  let runtime: EventRuntime;

  beforeAll(async () => {
    app = await startMediaApp({
      maxBytes: 2 * 1024 * 1024,
      users: ["anna", "marco", "greta"],
      env: { EVENTS_POLL_MS: "60000", ...(store.s3 ? s3!.env : {}) },
    });
    runtime = await startEventRuntime(app.t.services, { relay: true, subscribers: true });
  });
  afterAll(async () => {
    await runtime?.stop();
    await app?.close();
  });

  it("uploads, downloads byte for byte, and makes each size once with the right pixels", async () => {
    const image = await png(800, 400);
    const res = await app.upload(
      "anna",
      form({
        dimension: "PROD",
        record_id: "P0001",
        field: "IMAGE",
        file: { bytes: image, name: "bolt.png", type: "image/png" },
      }),
    );
    expect(res.status).toBe(201);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body).toMatchObject({
      size: image.length,
      mime_type: "image/png",
      url: "/api/v4/media/PROD/P0001/IMAGE",
    });
    expect(body.file_id).toMatch(/^[0-9a-f-]{36}$/);
    // The field holds the media object (written through the pipeline: audited, evented).
    const record = await (await app.get("anna", "/api/v4/core/PROD/P0001?source=catalog-1")).json();
    expect(record.data.IMAGE).toMatchObject({ file_id: body.file_id, size: image.length, public: false });
    expect(record.data.LOWNER).toBe("anna");

    const down = await app.get("anna", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1");
    expect(down.status).toBe(200);
    expect(down.headers.get("content-type")).toBe("image/png");
    expect(down.headers.get("content-length")).toBe(String(image.length));
    expect(down.headers.get("cache-control")).toContain("private");
    expect(Buffer.from(await down.arrayBuffer()).equals(image)).toBe(true);
    const core = await app.get("anna", "/api/v4/core/PROD/P0001/media/IMAGE?source=catalog-1");
    expect(Buffer.from(await core.arrayBuffer()).equals(image)).toBe(true);

    const expected = {
      thumbnail: [150, 75],
      small: [320, 160],
      medium: [640, 320],
      large: [800, 400],
    } as const;
    for (const [size, [w, h]] of Object.entries(expected)) {
      const r = await app.get("anna", `/api/v4/media/PROD/P0001/IMAGE?source=catalog-1&size=${size}`);
      expect(r.status, size).toBe(200);
      expect(r.headers.get("content-type")).toBe("image/png");
      const meta = await sharp(Buffer.from(await r.arrayBuffer())).metadata();
      expect([meta.format, meta.width, meta.height], size).toEqual(["png", w, h]);
    }
    const stored = await app.t.services.media.list(recordPrefix("acme", "PROD", "P0001"));
    expect(stored.map((o) => o.key.split("/").pop()).sort()).toEqual([
      "large",
      "medium",
      "original",
      "small",
      "thumbnail",
    ]);
  });

  it("ETag and If-None-Match (304), Range (206)", async () => {
    const first = await app.get("anna", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1");
    const etag = first.headers.get("etag")!;
    const bytes = Buffer.from(await first.arrayBuffer());
    expect(etag).toMatch(/^"[0-9a-f-]{36}-original"$/);
    const again = await app.get("anna", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1", {
      "if-none-match": etag,
    });
    expect(again.status).toBe(304);
    const part = await app.get("anna", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1", {
      range: "bytes=10-29",
    });
    expect(part.status).toBe(206);
    expect(part.headers.get("content-range")).toBe(`bytes 10-29/${bytes.length}`);
    expect(Buffer.from(await part.arrayBuffer()).equals(bytes.subarray(10, 30))).toBe(true);
    const beyond = await app.get("anna", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1", {
      range: `bytes=${bytes.length + 5}-`,
    });
    expect(beyond.status).toBe(416);
  });

  it("public files without a token; private ones are not public", async () => {
    const image = await png(100, 100);
    const res = await app.upload(
      "anna",
      form({
        dimension: "PROD",
        record_id: "P0002",
        field: "IMAGE",
        public: "true",
        file: { bytes: image, name: "n.png" },
      }),
    );
    expect(res.status).toBe(201);
    const { url } = (await res.json()) as { url: string };
    expect(url).toBe("/api/v4/media/public/PROD/P0002/IMAGE?tenant=acme");
    const pub = await app.get(null, url);
    expect(pub.status).toBe(200);
    expect(pub.headers.get("cache-control")).toContain("public");
    expect(Buffer.from(await pub.arrayBuffer()).equals(image)).toBe(true);
    expect((await app.get(null, "/api/v4/media/public/PROD/P0002/IMAGE?size=thumbnail")).status).toBe(200);
    // P0001's file is private: 404 without a token, 401 on the private path.
    expect((await app.get(null, "/api/v4/media/public/PROD/P0001/IMAGE")).status).toBe(404);
    expect((await app.get(null, "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1")).status).toBe(401);
    expect((await app.get(null, "/api/v4/media/public/PROD/P0002/IMAGE?tenant=globex")).status).toBe(404);
  });

  it("refuses oversize (413), the wrong type (415), sizes of a non-image (400), bad fields (400)", async () => {
    const big = Buffer.concat([Buffer.from("%PDF-1.4\n"), randomBytes(3 * 1024 * 1024)]);
    const tooBig = await app.upload(
      "anna",
      form({ dimension: "PROD", record_id: "P0003", field: "IMAGE", file: { bytes: big, name: "a.pdf" } }),
    );
    expect(tooBig.status).toBe(413);
    expect(((await tooBig.json()) as { code: string }).code).toBe("PAYLOAD_TOO_LARGE");
    const text = Buffer.from("just some text, not an image at all\n".repeat(10));
    const wrong = await app.upload(
      "anna",
      form({
        dimension: "PROD",
        record_id: "P0003",
        field: "IMAGE",
        file: { bytes: text, name: "x.png", type: "image/png" },
      }),
    );
    expect(wrong.status).toBe(415);
    expect(((await wrong.json()) as { code: string }).code).toBe("UNSUPPORTED_MEDIA_TYPE");
    const pdf = Buffer.concat([Buffer.from("%PDF-1.4\n"), randomBytes(2000)]);
    const ok = await app.upload(
      "anna",
      form({ dimension: "PROD", record_id: "P0003", field: "IMAGE", file: { bytes: pdf, name: "spec.pdf" } }),
    );
    expect(ok.status).toBe(201);
    expect((await app.get("anna", "/api/v4/media/PROD/P0003/IMAGE?source=catalog-1&size=small")).status).toBe(
      400,
    );
    const notMedia = await app.upload(
      "anna",
      form({ dimension: "PROD", record_id: "P0003", field: "NAME", file: { bytes: pdf, name: "s.pdf" } }),
    );
    expect(((await notMedia.json()) as { code: string }).code).toBe("INVALID_FIELD_TYPE");
    const traversal = await app.upload(
      "anna",
      form({ dimension: "PROD", record_id: "P0003", field: "../IMAGE", file: { bytes: pdf, name: "s.pdf" } }),
    );
    expect(traversal.status).toBe(400);
    const noRecord = await app.upload(
      "anna",
      form({
        dimension: "PROD",
        record_id: "../../P0003",
        field: "IMAGE",
        file: { bytes: pdf, name: "s.pdf" },
      }),
    );
    expect(noRecord.status).toBe(404);
    const huge = await app.upload(
      "anna",
      form({
        dimension: "PROD",
        record_id: "P0003",
        field: "IMAGE",
        file: { bytes: declaredPng(7000, 6000), name: "h.png" },
      }),
    );
    expect(huge.status).toBe(400);
    expect(((await huge.json()) as { code: string }).code).toBe("IMAGE_TOO_LARGE");
    const missing = await app.upload(
      "anna",
      form({ dimension: "PROD", field: "IMAGE", file: { bytes: pdf, name: "s.pdf" } }),
    );
    expect(((await missing.json()) as { field: string }).field).toBe("record_id");
    // Nothing refused is left in storage (staging included).
    expect(await app.t.services.media.list("staging/")).toEqual([]);
  });

  it("another tenant gets 404; a read-only user may download but not upload (403)", async () => {
    expect((await app.get("greta", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1")).status).toBe(404);
    const png1 = await png(10, 10);
    const theirs = await app.upload(
      "greta",
      form({ dimension: "PROD", record_id: "P0001", field: "IMAGE", file: { bytes: png1, name: "g.png" } }),
    );
    expect(theirs.status).toBe(404);
    expect((await app.get("marco", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1")).status).toBe(200);
    const refused = await app.upload(
      "marco",
      form({ dimension: "PROD", record_id: "P0001", field: "IMAGE", file: { bytes: png1, name: "m.png" } }),
    );
    expect(refused.status).toBe(403);
  });

  it("a replaced file is removed at once; a force-deleted record's files are removed after the commit", async () => {
    const created = await fetch(`${app.base}/api/v4/core/PROD?source=catalog-1`, {
      method: "POST",
      headers: { ...app.auth("anna"), "content-type": "application/json" },
      body: JSON.stringify({ data: { NAME: "Short-lived", UNIT_PRICE: 1 } }),
    });
    const id = ((await created.json()) as { data: { PROD_ID: string } }).data.PROD_ID;
    const one = await app.upload(
      "anna",
      form({
        dimension: "PROD",
        record_id: id,
        field: "IMAGE",
        file: { bytes: await png(20, 20), name: "1.png" },
      }),
    );
    const first = ((await one.json()) as { file_id: string }).file_id;
    const two = await app.upload(
      "anna",
      form({
        dimension: "PROD",
        record_id: id,
        field: "IMAGE",
        file: { bytes: await png(30, 30), name: "2.png" },
      }),
    );
    const second = ((await two.json()) as { file_id: string }).file_id;
    const keys = (await app.t.services.media.list(recordPrefix("acme", "PROD", id))).map((o) => o.key);
    expect(keys.some((k) => k.includes(second))).toBe(true);
    expect(keys.some((k) => k.includes(first))).toBe(false);
    const del = await fetch(`${app.base}/api/v4/core/PROD/${id}?source=catalog-1&force=true`, {
      method: "DELETE",
      headers: app.auth("anna"),
    });
    expect(del.status).toBe(200);
    await eventually(
      async () => (await app.t.services.media.list(recordPrefix("acme", "PROD", id))).length === 0,
      {
        what: "the record's files removed",
      },
    );
  });
});

describe("a 200 MB upload streams through (local store)", () => {
  let app: MediaApp;
  beforeAll(async () => {
    app = await startMediaApp({ maxBytes: 300 * 1024 * 1024, users: ["anna"] });
  });
  afterAll(() => app?.close());

  it("never holds more than a few MB of it in the process (RSS sampled during the upload)", async () => {
    const MB = 1024 * 1024;
    const chunk = randomBytes(MB);
    const boundary = `----dimensio${randomBytes(8).toString("hex")}`;
    const head = Buffer.from(
      `--${boundary}\r\nContent-Disposition: form-data; name="dimension"\r\n\r\nPROD\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="record_id"\r\n\r\nP0003\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="field"\r\n\r\nIMAGE\r\n` +
        `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="big.pdf"\r\n` +
        "Content-Type: application/pdf\r\n\r\n%PDF-1.4\n",
    );
    const tail = Buffer.from(`\r\n--${boundary}--\r\n`);
    let sent = 0;
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(head);
      },
      pull(controller) {
        if (sent >= 200) {
          controller.enqueue(tail);
          controller.close();
          return;
        }
        sent++;
        controller.enqueue(chunk);
      },
    });
    global.gc?.();
    const before = process.memoryUsage().rss;
    let peak = before;
    const sampler = setInterval(() => {
      peak = Math.max(peak, process.memoryUsage().rss);
    }, 10);
    const res = await fetch(`${app.base}/api/v4/media/upload?source=catalog-1`, {
      method: "POST",
      headers: {
        ...app.auth("anna"),
        "content-type": `multipart/form-data; boundary=${boundary}`,
      },
      body,
      duplex: "half",
    } as RequestInit);
    clearInterval(sampler);
    expect(res.status).toBe(201);
    const out = (await res.json()) as { size: number; mime_type: string };
    expect(out).toMatchObject({ size: 200 * MB + 9, mime_type: "application/pdf" });
    // 200 MB went through; the process grew by far less (client and server share it).
    expect(peak - before).toBeLessThan(64 * MB);
  }, 120_000);
});
