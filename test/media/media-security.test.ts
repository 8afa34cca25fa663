// Media security (issue 18 §4), on the local store and on a real S3-compatible server (s3rver): a
// MEDIA field's value comes from the upload path only (REST and GraphQL writes of a crafted value
// are 400 and change nothing); downloads carry a safe type, nosniff, a sandboxing CSP and
// attachment for non-images, whatever the stored value says; an upload the caller may not make is
// refused before a byte is stored; no empty directory is left behind; size=__proto__ is a 400.
import { randomBytes } from "node:crypto";
import { mkdtemp, readdir, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordPrefix } from "../../src/media/keys.ts";
import { createLocalStore } from "../../src/media/local-store.ts";
import { removeOtherFiles } from "../../src/resolvers/media.ts";
import type { SampleUser } from "../helpers/auth.ts";
import {
  type FormPart,
  form,
  type MediaApp,
  png,
  type S3Server,
  startMediaApp,
  startS3rver,
} from "./media-setup.ts";

let s3: S3Server | null = null;
beforeAll(async () => {
  s3 = await startS3rver();
});
afterAll(() => s3?.close());

const STORES = [
  { name: "local directory", s3: false },
  { name: "S3 (s3rver)", s3: true },
];

/** Every file and every empty directory under `dir` (relative paths). */
async function walk(dir: string): Promise<{ files: string[]; emptyDirs: string[] }> {
  const files: string[] = [];
  const emptyDirs: string[] = [];
  const visit = async (d: string) => {
    let entries: import("node:fs").Dirent[];
    try {
      entries = await readdir(d, { withFileTypes: true });
    } catch {
      return;
    }
    if (!entries.length && d !== dir) emptyDirs.push(path.relative(dir, d));
    for (const e of entries) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) await visit(p);
      else files.push(path.relative(dir, p));
    }
  };
  await visit(dir);
  return { files, emptyDirs };
}

describe.each(STORES)("media security ($name)", (store) => {
  let app: MediaApp;

  beforeAll(async () => {
    app = await startMediaApp({
      maxBytes: 4 * 1024 * 1024,
      users: ["anna", "marco"],
      ...(store.s3 ? { env: s3!.env } : {}),
    });
  });
  afterAll(() => app?.close());

  const json = (user: SampleUser, method: string, url: string, body: unknown) =>
    fetch(`${app.base}${url}`, {
      method,
      headers: { ...app.auth(user), "content-type": "application/json" },
      body: JSON.stringify(body),
    });
  const graphql = async (user: SampleUser, query: string, variables: Record<string, unknown>) =>
    (await json(user, "POST", "/graphql", { query, variables })).json() as Promise<{
      data?: Record<string, unknown>;
      errors?: Array<{ extensions: { code: string; status: number } }>;
    }>;
  const stored = async (id: string) => {
    const { rows } = await app.t.services.db.query<{ IMAGE: unknown }>(
      `SELECT "IMAGE" FROM "TB_ANAG_PROD00" WHERE "PROD_ID" = $1 AND "TENANT_ID" = 'acme'`,
      [id],
    );
    return rows[0]?.IMAGE;
  };
  /** Every object of the store: the files under DATA_DIR/media, or the bucket's keys. */
  const allObjects = async () =>
    [...(await app.t.services.media.list("t/")), ...(await app.t.services.media.list("staging/"))].map(
      (o) => o.key,
    );

  it("a REST or GraphQL write of a crafted media value is 400 MEDIA_VALUE_NOT_ALLOWED and changes nothing", async () => {
    const res = await app.upload(
      "anna",
      form([
        ["dimension", "PROD"],
        ["record_id", "P0001"],
        ["field", "IMAGE"],
        ["file", { bytes: await png(40, 40), name: "a.png" }],
      ]),
    );
    expect(res.status).toBe(201);
    const before = await stored("P0001");
    expect(before).toMatchObject({ mime_type: "image/png", public: false });
    const crafted = { ...(before as object), mime_type: "text/html", public: true };

    const patch = await json("anna", "PATCH", "/api/v4/core/PROD/P0001?source=catalog-1", {
      data: { IMAGE: crafted },
    });
    expect(patch.status).toBe(400);
    expect(await patch.json()).toMatchObject({
      code: "MEDIA_VALUE_NOT_ALLOWED",
      status: 400,
      field: "IMAGE",
      error: "ValidationError",
    });
    const put = await json("anna", "PUT", "/api/v4/core/PROD/P0001?source=catalog-1", {
      data: { NAME: "Bolt", UNIT_PRICE: 1, IMAGE: { file_id: "x" } },
    });
    expect(put.status).toBe(400);
    expect(((await put.json()) as { code: string }).code).toBe("MEDIA_VALUE_NOT_ALLOWED");
    const batch = await json("anna", "POST", "/api/v4/core/batch?source=catalog-1", {
      operations: [{ method: "PATCH", dim: "PROD", id: "P0001", data: { IMAGE: crafted } }],
    });
    expect(batch.status).toBe(400);

    const gql = await graphql(
      "anna",
      `mutation($data: JSON) { PROD_patch(source: "catalog-1", id: "P0001", data: { IMAGE: $data }) { data { PROD_ID } } }`,
      { data: crafted },
    );
    expect(gql.errors?.[0]?.extensions).toMatchObject({ code: "MEDIA_VALUE_NOT_ALLOWED", status: 400 });
    expect(await stored("P0001")).toEqual(before);
    // The public path still has nothing to serve.
    expect((await app.get(null, "/api/v4/media/public/PROD/P0001/IMAGE?tenant=acme")).status).toBe(404);

    // Sending back the value held (a record PATCHed as read) is accepted.
    const same = await json("anna", "PATCH", "/api/v4/core/PROD/P0001?source=catalog-1", {
      data: { NAME: "Bolt M8", IMAGE: before },
    });
    expect(same.status).toBe(200);
    expect(await stored("P0001")).toEqual(before);
  });

  it("a create that carries a media value is 400 too (REST, GraphQL), one with null is not", async () => {
    // The sample's IMAGE may not be sent on create (no N): give it N for this test.
    const cost = await json("anna", "PATCH", "/api/v4/core/COST/PROD/6?source=erp", {
      data: { COD_ON_OFF: "LDNM" },
    });
    expect(cost.status, JSON.stringify(await cost.clone().json())).toBe(200);
    const crafted = {
      file_id: "0b7c4b1e-4a4e-4a38-9a53-1f6b2f7b9c11",
      url: "/api/v4/media/public/PROD/X/IMAGE?tenant=acme",
      size: 10,
      mime_type: "text/html",
      uploaded_at: new Date().toISOString(),
      public: true,
    };
    const rest = await json("anna", "POST", "/api/v4/core/PROD?source=catalog-1", {
      data: { NAME: "Crafted", UNIT_PRICE: 1, IMAGE: crafted },
    });
    expect(rest.status).toBe(400);
    expect(await rest.json()).toMatchObject({ code: "MEDIA_VALUE_NOT_ALLOWED", field: "IMAGE" });
    const gql = await graphql(
      "anna",
      `mutation($img: JSON) { PROD_create(source: "catalog-1", data: { NAME: "Crafted", UNIT_PRICE: 1, IMAGE: $img }) { data { PROD_ID } } }`,
      { img: crafted },
    );
    expect(gql.errors?.[0]?.extensions).toMatchObject({ code: "MEDIA_VALUE_NOT_ALLOWED", status: 400 });
    const { rows } = await app.t.services.db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM "TB_ANAG_PROD00" WHERE "NAME" = 'Crafted'`,
    );
    expect(rows[0]!.n).toBe(0);
    const plain = await json("anna", "POST", "/api/v4/core/PROD?source=catalog-1", {
      data: { NAME: "Plain", UNIT_PRICE: 1, IMAGE: null },
    });
    expect(plain.status).toBe(201);
    const back = await json("anna", "PATCH", "/api/v4/core/COST/PROD/6?source=erp", {
      data: { COD_ON_OFF: "LDM" },
    });
    expect(back.status).toBe(200);
  });

  it("clearing a media field (null) is a write like any other", async () => {
    const res = await app.upload(
      "anna",
      form([
        ["dimension", "PROD"],
        ["record_id", "P0003"],
        ["field", "IMAGE"],
        ["file", { bytes: await png(10, 10), name: "c.png" }],
      ]),
    );
    expect(res.status).toBe(201);
    const clear = await json("anna", "PATCH", "/api/v4/core/PROD/P0003?source=catalog-1", {
      data: { IMAGE: null },
    });
    expect(clear.status).toBe(200);
    expect(await stored("P0003")).toBeNull();
  });

  it("downloads: nosniff, a sandboxing CSP, inline images, attachment for the rest", async () => {
    const img = await app.get("anna", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1");
    expect(img.status).toBe(200);
    expect(img.headers.get("content-type")).toBe("image/png");
    expect(img.headers.get("x-content-type-options")).toBe("nosniff");
    expect(img.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    expect(img.headers.get("content-disposition")).toBe("inline");
    const thumb = await app.get("anna", "/api/v4/media/PROD/P0001/IMAGE?source=catalog-1&size=thumbnail");
    expect(thumb.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");

    const pdf = Buffer.concat([Buffer.from("%PDF-1.4\n<html><script>alert(1)</script>\n"), randomBytes(500)]);
    const up = await app.upload(
      "anna",
      form([
        ["dimension", "PROD"],
        ["record_id", "P0002"],
        ["field", "IMAGE"],
        ["public", "true"],
        ["file", { bytes: pdf, name: "polyglot.html" }],
      ]),
    );
    expect(up.status).toBe(201);
    const fileId = ((await up.json()) as { file_id: string }).file_id;
    const doc = await app.get(null, "/api/v4/media/public/PROD/P0002/IMAGE?tenant=acme");
    expect(doc.status).toBe(200);
    expect(doc.headers.get("content-type")).toBe("application/pdf");
    expect(doc.headers.get("x-content-type-options")).toBe("nosniff");
    expect(doc.headers.get("content-security-policy")).toBe("default-src 'none'; sandbox");
    expect(doc.headers.get("content-disposition")).toBe(`attachment; filename="IMAGE-${fileId}.pdf"`);
    await doc.arrayBuffer();
  });

  it("a stored type that is not a safe one (HTML, a line break) is served as application/octet-stream", async () => {
    // A value written before uploads alone could set it: straight into the table.
    for (const type of ["text/html", "image/png\r\nSet-Cookie: stolen=1", "image/svg+xml"]) {
      await app.t.services.db.query(
        `UPDATE "TB_ANAG_PROD00" SET "IMAGE" = jsonb_set("IMAGE", '{mime_type}', to_jsonb($1::text))
          WHERE "PROD_ID" = 'P0002' AND "TENANT_ID" = 'acme'`,
        [type],
      );
      const res = await app.get(null, "/api/v4/media/public/PROD/P0002/IMAGE?tenant=acme");
      expect(res.status, type).toBe(200);
      expect(res.headers.get("content-type"), type).toBe("application/octet-stream");
      expect(res.headers.get("content-disposition"), type).toMatch(/^attachment/);
      expect(res.headers.get("set-cookie"), type).toBeNull();
      await res.arrayBuffer();
      const sized = await app.get(null, "/api/v4/media/public/PROD/P0002/IMAGE?tenant=acme&size=small");
      expect(sized.status, type).toBe(400);
    }
  });

  it("size=__proto__, toString, constructor: 400 INVALID_PARAMETER", async () => {
    for (const size of ["__proto__", "toString", "constructor", "hasOwnProperty", "valueOf"]) {
      const res = await app.get("anna", `/api/v4/media/PROD/P0001/IMAGE?source=catalog-1&size=${size}`);
      expect(res.status, size).toBe(400);
      expect(((await res.json()) as { code: string }).code, size).toBe("INVALID_PARAMETER");
    }
  });

  /**
   * `work`, with the store watched while it runs: every object that appeared, even for a moment
   * (and, on the local store, every empty directory left behind).
   */
  const watchingTheStore = async (work: () => Promise<Response>) => {
    const before = await allObjects();
    let seen: string[] = [];
    let watching = true;
    const watcher = (async () => {
      while (watching) {
        const now = await allObjects();
        seen = [...new Set([...seen, ...now.filter((k) => !before.includes(k))])];
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    try {
      const res = await work();
      return { res, body: (await res.json()) as { code: string; message: string }, seen };
    } finally {
      watching = false;
      await watcher;
    }
  };
  const emptyDirsLeft = async () => (store.s3 ? [] : (await walk(path.join(app.dataDir, "media"))).emptyDirs);

  it("an upload the caller may make on the source but not to that record or field stores nothing; a file before the parts naming it is refused unread", async () => {
    const big = Buffer.concat([Buffer.from("%PDF-1.4\n"), randomBytes(3 * 1024 * 1024)]);
    const file: [string, FormPart] = ["file", { bytes: big, name: "b.pdf" }];
    const refused: Array<{ naming: Array<[string, FormPart]>; url?: string; status: number; code: string }> =
      [
        {
          naming: [
            ["dimension", "PROD"],
            ["record_id", "NOPE"],
            ["field", "IMAGE"],
          ],
          status: 404,
          code: "RECORD_NOT_FOUND",
        },
        {
          naming: [
            ["dimension", "PROD"],
            ["record_id", "P0001"],
            ["field", "NAME"],
          ],
          status: 400,
          code: "INVALID_FIELD_TYPE",
        },
        {
          naming: [
            ["record_id", "NOPE"],
            ["field", "IMAGE"],
          ],
          url: "/api/v4/core/PROD/media?source=catalog-1",
          status: 404,
          code: "RECORD_NOT_FOUND",
        },
      ];
    for (const { naming, url, status, code } of refused) {
      for (const parts of [
        [file, ...naming],
        [...naming, file],
      ]) {
        const fileFirst = parts[0]![0] === "file";
        const order = fileFirst ? "file first" : "file last";
        const { res, body, seen } = await watchingTheStore(() => app.upload("anna", form(parts), url));
        // The file before the parts naming its record is refused as such, whatever they name.
        expect([res.status, body.code], order).toEqual(fileFirst ? [400, "INVALID_REQUEST"] : [status, code]);
        expect(seen, order).toEqual([]);
        expect(await emptyDirsLeft(), order).toEqual([]);
      }
    }
    // A part naming the record sent again after the file is refused (it would retarget the file).
    const twice = await watchingTheStore(() =>
      app.upload(
        "anna",
        form([
          ["dimension", "PROD"],
          ["record_id", "P0001"],
          ["field", "IMAGE"],
          file,
          ["record_id", "NOPE"],
        ]),
      ),
    );
    expect([twice.res.status, twice.body.code]).toEqual([400, "INVALID_REQUEST"]);
    expect(await allObjects()).not.toContain(expect.stringMatching(/^staging\//));
    // A file before the parts naming its record (issue 35 §5): 400, the answer names what was
    // missing before it, and nothing is stored, not even a staged file.
    const image = await png(24, 24);
    const before = await stored("P0002");
    const fileFirst = await watchingTheStore(() =>
      app.upload(
        "anna",
        form([
          ["dimension", "PROD"],
          ["file", { bytes: image, name: "p.png" }],
          ["record_id", "P0002"],
          ["field", "IMAGE"],
        ]),
      ),
    );
    expect(fileFirst.res.status).toBe(400);
    expect(fileFirst.body).toMatchObject({
      error: "BadRequest",
      code: "INVALID_REQUEST",
      status: 400,
      field: "record_id",
      details: { missing: ["record_id", "field"] },
    });
    expect(fileFirst.body.message).toBe(
      "Send the parts dimension, record_id, field before the part file (missing before it: record_id, field).",
    );
    expect(fileFirst.seen).toEqual([]);
    expect(await stored("P0002")).toEqual(before);
  });

  it("a read-only user's upload is 403 before a byte is stored, whatever the order of the parts", async () => {
    const before = await allObjects();
    const big = Buffer.concat([Buffer.from("%PDF-1.4\n"), randomBytes(3 * 1024 * 1024)]);
    const orders: Array<Array<[string, FormPart]>> = [
      [
        ["file", { bytes: big, name: "b.pdf" }],
        ["dimension", "PROD"],
        ["record_id", "P0001"],
        ["field", "IMAGE"],
      ],
      [
        ["dimension", "PROD"],
        ["record_id", "P0001"],
        ["field", "IMAGE"],
        ["file", { bytes: big, name: "b.pdf" }],
      ],
    ];
    for (const parts of orders) {
      const { res, body, seen } = await watchingTheStore(() => app.upload("marco", form(parts)));
      expect(res.status).toBe(403);
      expect(body.code).toBe("INSUFFICIENT_PERMISSIONS");
      expect(seen).toEqual([]);
    }
    // The path's dimension is checked before the file too.
    const viaPath = await app.upload(
      "marco",
      form([["file", { bytes: big, name: "b.pdf" }]]),
      "/api/v4/core/PROD/media?source=catalog-1",
    );
    expect(viaPath.status).toBe(403);
    // A field the caller may not modify, or a record of no one, before the file: refused as well.
    const notModifiable = await app.upload(
      "anna",
      form([
        ["dimension", "PROD"],
        ["record_id", "P0001"],
        ["field", "NAME"],
        ["file", { bytes: big, name: "b.pdf" }],
      ]),
    );
    expect(notModifiable.status).toBe(400);
    const missing = await app.upload(
      "anna",
      form([
        ["dimension", "PROD"],
        ["record_id", "NOPE"],
        ["field", "IMAGE"],
        ["file", { bytes: big, name: "b.pdf" }],
      ]),
    );
    expect(missing.status).toBe(404);
    expect((await allObjects()).sort()).toEqual([...before].sort());
  });

  it("no object and (local store) no empty directory is left after failed uploads and deletes", async () => {
    const root = path.join(app.dataDir, "media");
    // S3 has no directories: there the check is that no object is left.
    const emptyDirs = async () => (store.s3 ? [] : (await walk(root)).emptyDirs);
    const created = await json("anna", "POST", "/api/v4/core/PROD?source=catalog-1", {
      data: { NAME: "Temporary", UNIT_PRICE: 1 },
    });
    const id = ((await created.json()) as { data: { PROD_ID: string } }).data.PROD_ID;
    for (const size of [20, 30]) {
      const res = await app.upload(
        "anna",
        form([
          ["dimension", "PROD"],
          ["record_id", id],
          ["field", "IMAGE"],
          ["file", { bytes: await png(size, size), name: "t.png" }],
        ]),
      );
      expect(res.status).toBe(201);
      expect(
        (await app.get("anna", `/api/v4/media/PROD/${id}/IMAGE?source=catalog-1&size=small`)).status,
      ).toBe(200);
    }
    const wrongType = await app.upload(
      "anna",
      form([
        ["dimension", "PROD"],
        ["record_id", id],
        ["field", "IMAGE"],
        ["file", { bytes: Buffer.from("plain text, no image\n".repeat(20)), name: "x.png" }],
      ]),
    );
    expect(wrongType.status).toBe(415);
    expect(await app.t.services.media.list("staging/")).toEqual([]);
    expect(await emptyDirs()).toEqual([]);
    const del = await fetch(`${app.base}/api/v4/core/PROD/${id}?source=catalog-1&force=true`, {
      method: "DELETE",
      headers: app.auth("anna"),
    });
    expect(del.status).toBe(200);
    // The force delete's clean-up runs on the event: remove the record's files the way it does.
    await removeOtherFiles(app.t.services.media, "acme", "PROD", id, "IMAGE", null);
    expect(await emptyDirs()).toEqual([]);
    expect(await app.t.services.media.list(recordPrefix("acme", "PROD", id))).toEqual([]);
    if (!store.s3) expect((await walk(root)).files.filter((f) => f.startsWith("staging"))).toEqual([]);
  });
});

describe("the local store under concurrent clean-up", () => {
  it("lists while files go, and writes into directories being pruned, without an error", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "dimensio-local-race-"));
    try {
      const store = createLocalStore(dir);
      const key = (i: number, round: number) => `t/acme/PROD/${i % 5}/IMAGE/${round}-${i}/original`;
      for (let round = 0; round < 5; round++) {
        const keys = Array.from({ length: 40 }, (_, i) => key(i, round));
        await Promise.all(keys.map((k) => store.put(k, Readable.from([Buffer.from(k)]), "image/png")));
        const next = Array.from({ length: 40 }, (_, i) => key(i, round + 100));
        // Deletes (pruning directories), listings and writes into the same directories, at once.
        const results = await Promise.allSettled([
          store.delete(keys),
          store.list("t/"),
          store.list("t/acme/PROD/1/"),
          ...next.map((k) => store.put(k, Readable.from([Buffer.from(k)]), "image/png")),
        ]);
        expect(results.filter((r) => r.status === "rejected")).toEqual([]);
        expect((await store.list("t/")).map((o) => o.key).sort()).toEqual([...next].sort());
        await store.delete(next);
        expect(await readdir(dir)).toEqual([]);
      }
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
