// The setup the media test files share: a real S3-compatible server (s3rver) on loopback (also
// the S3 store of test/robustness/faults-redis-s3, behind its proxy), the service listening on a
// real port over a data directory of its own (multipart uploads go through fetch, not inject),
// sample users' tokens, and the request helpers and multipart forms built on them.
import { mkdtemp, rm } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import S3rver from "s3rver";
import sharp from "sharp";
import { bearer, loginAs, SAMPLE_USERS, type SampleUser } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

export interface S3Server {
  /** The port s3rver listens on (127.0.0.1). */
  port: number;
  /** The configuration that points the service's media store at this server's "media" bucket. */
  env: Record<string, string>;
  close(): Promise<void>;
}

/** The media store's configuration for s3rver's "media" bucket at 127.0.0.1:`port` (or a proxy to it). */
export const s3Env = (port: number): Record<string, string> => ({
  S3_ENDPOINT: `http://127.0.0.1:${port}`,
  S3_BUCKET: "media",
  S3_ACCESS_KEY_ID: "S3RVER",
  S3_SECRET_ACCESS_KEY: "S3RVER",
  S3_FORCE_PATH_STYLE: "true",
});

/** s3rver on 127.0.0.1 with a "media" bucket, storing in a temporary directory removed on close. */
export async function startS3rver(): Promise<S3Server> {
  const dir = await mkdtemp(path.join(tmpdir(), "dimensio-s3-"));
  const s3 = new S3rver({
    port: 0,
    address: "127.0.0.1",
    silent: true,
    directory: dir,
    configureBuckets: [{ name: "media", configs: [] }],
  });
  const { port } = (await s3.run()) as AddressInfo;
  return {
    port,
    env: s3Env(port),
    async close() {
      await s3.close();
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** A real PNG of w × h pixels in one colour. */
export const png = (w: number, h: number) =>
  sharp({ create: { width: w, height: h, channels: 3, background: { r: 200, g: 40, b: 40 } } })
    .png()
    .toBuffer();

export type FormPart = string | { bytes: Buffer; name: string; type?: string };

/** A multipart form; a list keeps the parts in its order and may name one part twice. */
export function form(parts: Record<string, FormPart> | Array<[string, FormPart]>): FormData {
  const fd = new FormData();
  for (const [k, v] of Array.isArray(parts) ? parts : Object.entries(parts)) {
    if (typeof v === "string") fd.append(k, v);
    else
      fd.append(
        k,
        new Blob([new Uint8Array(v.bytes)], { type: v.type ?? "application/octet-stream" }),
        v.name,
      );
  }
  return fd;
}

export interface MediaAppOptions {
  /** MEDIA_MAX_BYTES. */
  maxBytes: number;
  /** Sample users signed in; their tokens back auth(). */
  users: readonly SampleUser[];
  /** Further configuration (a store's S3 settings, EVENTS_POLL_MS). */
  env?: Record<string, string>;
}

export interface MediaApp {
  t: TestApp;
  /** DATA_DIR: the local store keeps its files under <dataDir>/media. */
  dataDir: string;
  /** http://127.0.0.1:<port> of the listening service. */
  base: string;
  auth(user: SampleUser): { authorization: string };
  upload(user: SampleUser, fd: FormData, url?: string): Promise<Response>;
  get(user: SampleUser | null, url: string, headers?: Record<string, string>): Promise<Response>;
  close(): Promise<void>;
}

export async function startMediaApp(opts: MediaAppOptions): Promise<MediaApp> {
  const dataDir = await mkdtemp(path.join(tmpdir(), "dimensio-media-"));
  const removeDataDir = () => rm(dataDir, { recursive: true, force: true });
  let t: TestApp;
  try {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, DATA_DIR: dataDir, MEDIA_MAX_BYTES: String(opts.maxBytes), ...opts.env },
    });
  } catch (err) {
    await removeDataDir();
    throw err;
  }
  const tokens: Partial<Record<SampleUser, string>> = {};
  try {
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    for (const u of opts.users) {
      tokens[u] = await loginAs(t.app, SAMPLE_USERS[u].username, SAMPLE_USERS[u].password);
    }
  } catch (err) {
    await t.close();
    await removeDataDir();
    throw err;
  }
  const base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
  const auth = (user: SampleUser) => {
    const token = tokens[user];
    if (!token) throw new Error(`${user} is not among the users startMediaApp signed in`);
    return bearer(token);
  };
  return {
    t,
    dataDir,
    base,
    auth,
    upload: (user, fd, url = "/api/v4/media/upload?source=catalog-1") =>
      fetch(`${base}${url}`, { method: "POST", headers: auth(user), body: fd }),
    get: (user, url, headers = {}) =>
      fetch(`${base}${url}`, { headers: { ...(user ? auth(user) : {}), ...headers } }),
    async close() {
      await t.close();
      await removeDataDir();
    },
  };
}
