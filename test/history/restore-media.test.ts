// A revision restore restores what it can (docs/decisions.md, "Record history", Restore): a MEDIA
// field the revision changed is left as it is (a file is set by uploading one; the earlier file may
// be gone), and the revision's other fields are written back. It was refused whole with
// MEDIA_VALUE_NOT_ALLOWED.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { form, type MediaApp, png, startMediaApp } from "../media/media-setup.ts";

describe("restoring a revision that changed a MEDIA field (pglite)", () => {
  let app: MediaApp;
  beforeAll(async () => {
    app = await startMediaApp({ maxBytes: 2 * 1024 * 1024, users: ["anna"] });
  });
  afterAll(async () => {
    await app?.close();
  });

  // biome-ignore lint/suspicious/noExplicitAny: response bodies read by shape
  type Body = Record<string, any>;
  const json = async (res: Response) => ({
    status: res.status,
    body: (await res.json()) as Body,
  });
  const call = (method: string, url: string, body?: unknown) =>
    fetch(`${app.base}${url}`, {
      method,
      headers: { ...app.auth("anna"), "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    }).then(json);

  it("writes the revision's other fields back and leaves the file as it is", async () => {
    const created = await call("POST", "/api/v4/core/PROD?source=catalog-1", {
      data: { NAME: "Before", UNIT_PRICE: 1 },
    });
    expect(created.status).toBe(201);
    const id = created.body.data.PROD_ID as string;
    const upload = async (w: number) => {
      const res = await app.upload(
        "anna",
        form({
          dimension: "PROD",
          record_id: id,
          field: "IMAGE",
          file: { bytes: await png(w, 10), name: "p.png", type: "image/png" },
        }),
      );
      expect(res.status).toBe(201);
      return ((await res.json()) as { file_id: string }).file_id;
    };
    const first = await upload(10);
    // A revision that changes the name and the image together is not made by one request: a PATCH
    // of the name, then a second upload, make two. The one to restore is the name's and first image's.
    expect(
      (await call("PATCH", `/api/v4/core/PROD/${id}?source=catalog-1`, { data: { NAME: "Middle" } })).status,
    ).toBe(200);
    const second = await upload(20);
    expect(
      (await call("PATCH", `/api/v4/core/PROD/${id}?source=catalog-1`, { data: { NAME: "After" } })).status,
    ).toBe(200);

    const history = await call("GET", `/api/v4/core/PROD/${id}/history?source=catalog-1`);
    expect(history.status).toBe(200);
    const revisions = history.body.data as Array<{ revision: number; changes: Record<string, unknown> }>;
    // Newest first: the last revision that changed IMAGE is the first upload's.
    const firstUpload = revisions.filter((r) => "IMAGE" in r.changes).at(-1)!;
    expect((firstUpload.changes.IMAGE as { after: { file_id: string } }).after.file_id).toBe(first);
    const created1 = revisions.find((r) => r.revision === 1)!;
    expect(created1.changes).toHaveProperty("NAME");

    // Revision 2 (the first upload) changed IMAGE only: restoring it restores nothing it may write,
    // and is not refused. Revision 1 (the create) set NAME: restoring it brings the name back.
    const restoredUpload = await call(
      "POST",
      `/api/v4/core/PROD/${id}/history/${firstUpload.revision}/restore?source=catalog-1`,
    );
    expect(restoredUpload.status).toBe(200);
    expect(restoredUpload.body.data.IMAGE.file_id).toBe(second);
    const restoredCreate = await call("POST", `/api/v4/core/PROD/${id}/history/1/restore?source=catalog-1`);
    expect(restoredCreate.status).toBe(200);
    expect(restoredCreate.body.data.NAME).toBe("Before");
    expect(restoredCreate.body.data.IMAGE.file_id).toBe(second);
  });
});
