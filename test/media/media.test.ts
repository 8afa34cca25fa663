// Media (spec 4.5, decisions.md §13, issue 12) on the local store and on a real S3-compatible
// server (s3rver, started here on loopback): upload, byte-for-byte download, sizes with their pixel
// dimensions, ETag/304, Range, public versus private, limits, tenants, rights, clean-up.
import { randomBytes } from "node:crypto";
import sharp from "sharp";
import { Readable } from "node:stream";
import zlib from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { fileKey, recordPrefix } from "../../src/media/keys.ts";
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

/** A w × h image in `format` whose pixels vary (its data does not compress to a few bytes). */
function noisy(w: number, h: number, format: "png" | "jpeg"): Promise<Buffer> {
  const raw = Buffer.alloc(w * h * 3);
  for (let i = 0; i < raw.length; i++) raw[i] = (i * 7919) % 251;
  return sharp(raw, { raw: { width: w, height: h, channels: 3 } })
    [format]()
    .toBuffer();
}

/** An animated GIF of `frames` frames of w × h pixels (one frame's image data, repeated). */
async function animatedGif(frames: number, w: number, h: number): Promise<Buffer> {
  const one = await sharp({ create: { width: w, height: h, channels: 3, background: "#c82828" } })
    .gif()
    .toBuffer();
  // Header and logical screen, then its global colour table; then blocks up to the trailer (0x3b):
  // extensions (0x21) and the image (0x2c: descriptor, local colour table, LZW data sub-blocks).
  let p = 13;
  if (one[10]! & 0x80) p += 3 * 2 ** ((one[10]! & 7) + 1);
  const head = one.subarray(0, p);
  const subBlocks = (q: number) => {
    while (one[q] !== 0) q += one[q]! + 1;
    return q + 1;
  };
  const start = p;
  while (one[p] !== 0x2c) p = subBlocks(p + 2);
  const flags = one[p + 9]!;
  p += 10 + (flags & 0x80 ? 3 * 2 ** ((flags & 7) + 1) : 0);
  const frame = one.subarray(start, subBlocks(p + 1));
  const loop = Buffer.from([0x21, 0xff, 0x0b, ...Buffer.from("NETSCAPE2.0"), 3, 1, 0, 0, 0]);
  return Buffer.concat([head, loop, ...Array<Buffer>(frames).fill(frame), Buffer.from([0x3b])]);
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
  /** A new PROD record of acme's (anna's): its id. */
  const newProduct = async (name: string) => {
    const created = await fetch(`${app.base}/api/v4/core/PROD?source=catalog-1`, {
      method: "POST",
      headers: { ...app.auth("anna"), "content-type": "application/json" },
      body: JSON.stringify({ data: { NAME: name, UNIT_PRICE: 1 } }),
    });
    expect(created.status).toBe(201);
    return ((await created.json()) as { data: { PROD_ID: string } }).data.PROD_ID;
  };

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

  it("a part contradicting the path or the query string, or of no meaning, is 400 INVALID_PARAMETER naming it; source may come as a part", async () => {
    const id = await newProduct("Parts");
    const image = await png(16, 16);
    const file: [string, { bytes: Buffer; name: string; type: string }] = [
      "file",
      { bytes: image, name: "p.png", type: "image/png" },
    ];
    const naming: Array<[string, string]> = [
      ["record_id", id],
      ["field", "IMAGE"],
    ];
    const refused = async (parts: Array<[string, string | (typeof file)[1]]>, url?: string) => {
      const res = await app.upload("anna", form(parts), url);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };
    // The path names PROD; a dimension part naming another was left unread (the file went to PROD).
    const otherDim = await refused(
      [["dimension", "CUST"], ...naming, file],
      "/api/v4/core/PROD/media?source=catalog-1",
    );
    expect(otherDim).toEqual({
      status: 400,
      body: {
        error: "BadRequest",
        code: "INVALID_PARAMETER",
        status: 400,
        field: "dimension",
        message:
          "The part dimension names CUST, but the path names PROD: the file goes to the path's dimension. Leave the part out, or give the same.",
      },
    });
    // A source part that the query string contradicts, as a JSON write body's source.
    const otherSource = await refused([["dimension", "PROD"], ...naming, ["source", "anag-1"], file]);
    expect(otherSource).toEqual({
      status: 400,
      body: {
        error: "BadRequest",
        code: "INVALID_PARAMETER",
        status: 400,
        field: "source",
        message:
          "source is given twice with different values: 'catalog-1' in the query string, 'anag-1' in the form part. Give it once, or the same in both.",
      },
    });
    // A part of no meaning to an upload, before or after the file.
    for (const parts of [
      [["dimension", "PROD"], ...naming, ["extra", "1"], file],
      [["dimension", "PROD"], ...naming, file, ["extra", "1"]],
    ] as Array<Array<[string, string | (typeof file)[1]]>>) {
      const unknown = await refused(parts);
      expect(unknown.status).toBe(400);
      expect(unknown.body).toMatchObject({ code: "INVALID_PARAMETER", field: "extra" });
      expect(unknown.body.message).toBe(
        "The part extra is not taken by an upload, whose form has the parts dimension, record_id, field, public, source, center_dett, then file.",
      );
    }
    // None of them wrote the field.
    const untouched = await (await app.get("anna", `/api/v4/core/PROD/${id}?source=catalog-1`)).json();
    expect(untouched.data.IMAGE).toBeNull();
    // The same dimension as the path, and source given only as a part (or the same in both), are taken.
    const samePath = await refused(
      [["dimension", "PROD"], ...naming, file],
      "/api/v4/core/PROD/media?source=catalog-1",
    );
    expect(samePath.status).toBe(201);
    const sourcePart = await refused(
      [["source", "catalog-1"], ["dimension", "PROD"], ...naming, file],
      "/api/v4/media/upload",
    );
    expect(sourcePart.status).toBe(201);
    expect(sourcePart.body).toMatchObject({ url: `/api/v4/media/PROD/${id}/IMAGE`, mime_type: "image/png" });
    const agreeing = await refused([["source", "catalog-1"], ["dimension", "PROD"], ...naming, file]);
    expect(agreeing.status).toBe(201);
  });

  it("refuses an image cut short and an animated GIF over 40 MP in all its frames (400), storing nothing", async () => {
    const id = await newProduct("Damaged images");
    const upload = (bytes: Buffer, name: string) =>
      app.upload("anna", form({ dimension: "PROD", record_id: id, field: "IMAGE", file: { bytes, name } }));
    const png = await noisy(400, 300, "png");
    const jpeg = await noisy(400, 300, "jpeg");
    for (const [bytes, name] of [
      [png.subarray(0, png.length >> 1), "half.png"],
      [jpeg.subarray(0, jpeg.length - 200), "cut.jpg"],
    ] as const) {
      const res = await upload(bytes, name);
      expect([name, res.status], name).toEqual([name, 400]);
      expect(await res.json()).toMatchObject({
        code: "INVALID_FILE",
        field: "file",
        message: "The image cannot be read: it is damaged or cut short.",
      });
    }
    // 41 frames of 1 MP: the first frame alone is far below the limit.
    const gif = await upload(await animatedGif(41, 1000, 1000), "anim.gif");
    expect(gif.status).toBe(400);
    expect(await gif.json()).toMatchObject({
      code: "IMAGE_TOO_LARGE",
      field: "file",
      details: { width: 1000, height: 1000, frames: 41 },
      message: "The image has more than 40 megapixels, its 41 frames counted.",
    });
    expect(await app.t.services.media.list("staging/")).toEqual([]);
    expect(await app.t.services.media.list(recordPrefix("acme", "PROD", id))).toEqual([]);
    // Whole, they are taken, and so is an animated GIF under the limit.
    expect((await upload(png, "whole.png")).status).toBe(201);
    expect((await upload(jpeg, "whole.jpg")).status).toBe(201);
    expect((await upload(await animatedGif(4, 300, 200), "anim.gif")).status).toBe(201);
    const thumb = await app.get("anna", `/api/v4/media/PROD/${id}/IMAGE?source=catalog-1&size=thumbnail`);
    expect(thumb.status).toBe(200);
    // Each frame made 150 × 100 (not the frames as one strip); the GIF encoder merges identical frames.
    const meta = await sharp(Buffer.from(await thumb.arrayBuffer())).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(["gif", 150, 100]);
  });

  it("a size of a stored image that cannot be made (damaged, over 40 MP) is 422, never 500; the original is still served", async () => {
    const id = await newProduct("Stored damaged");
    const url = `/api/v4/media/PROD/${id}/IMAGE?source=catalog-1`;
    // Stored as they were before uploads were checked whole: an upload of the same type, its file
    // then overwritten in the store.
    const storedAs = async (bytes: Buffer, type: "png" | "gif") => {
      const res = await app.upload(
        "anna",
        form({
          dimension: "PROD",
          record_id: id,
          field: "IMAGE",
          file: {
            bytes: type === "png" ? await png(10, 10) : await animatedGif(1, 10, 10),
            name: `p.${type}`,
          },
        }),
      );
      expect(res.status).toBe(201);
      const { file_id, mime_type } = (await res.json()) as { file_id: string; mime_type: string };
      expect(mime_type).toBe(`image/${type}`);
      await app.t.services.media.put(
        fileKey("acme", "PROD", id, "IMAGE", file_id),
        Readable.from([bytes]),
        `image/${type}`,
      );
    };
    const png1 = await noisy(400, 300, "png");
    const half = png1.subarray(0, png1.length >> 1);
    await storedAs(half, "png");
    for (let i = 0; i < 2; i++) {
      const thumb = await app.get("anna", `${url}&size=thumbnail`);
      expect(thumb.status).toBe(422);
      expect(await thumb.json()).toMatchObject({
        error: "ValidationError",
        code: "INVALID_FILE",
        status: 422,
        field: "size",
        message:
          "The stored image cannot be read (it is damaged or cut short), so it has no thumbnail size; download it without size.",
      });
    }
    const original = await app.get("anna", url);
    expect(original.status).toBe(200);
    expect(Buffer.from(await original.arrayBuffer()).equals(half)).toBe(true);

    await storedAs(await animatedGif(41, 1000, 1000), "gif");
    const small = await app.get("anna", `${url}&size=small`);
    expect(small.status).toBe(422);
    expect(await small.json()).toMatchObject({
      code: "IMAGE_TOO_LARGE",
      status: 422,
      field: "size",
      details: { frames: 41 },
    });
    // No size was stored for either.
    const keys = (await app.t.services.media.list(recordPrefix("acme", "PROD", id))).map((o) => o.key);
    expect(keys.map((k) => k.split("/").pop())).toEqual(["original"]);
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
