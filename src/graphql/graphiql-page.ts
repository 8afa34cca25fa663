// GraphiQL's page (about 9 MB of bundled scripts, no CDN) as a cached, precompressed asset
// (issue 18 §3): rendered once per endpoint on the first visit, gzip and brotli computed once off
// the event loop (zlib's thread pool), then every visit sends the same buffers: an ETag answers
// 304, a browser that accepts br or gzip gets ~2 MB instead of 9, and no visit allocates a copy.
// The page carries its own Content-Security-Policy: its two inline scripts by hash, connections
// to this origin only, workers from blob: (its editor's language services).
import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);

export interface GraphiQLAsset {
  etag: string;
  csp: string;
  identity: Buffer;
  gzip: Buffer;
  br: Buffer;
}

export type Encoding = "br" | "gzip" | "identity";

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("base64");
}

/** The CSP of a page: its inline scripts by hash, everything else from this origin. */
export function pageCsp(html: string): string {
  const scripts = [...html.matchAll(/<script(?:\s[^>]*)?>([\s\S]*?)<\/script>/g)]
    .map((m) => m[1]!)
    .filter((body) => body.length > 0)
    .map((body) => `'sha256-${sha256(body)}'`);
  return [
    "default-src 'none'",
    `script-src 'self' ${scripts.join(" ")}`,
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** The page's buffers, computed once; concurrent first visits share the work. */
export function graphiqlAsset(render: () => Promise<string>): () => Promise<GraphiQLAsset> {
  let asset: Promise<GraphiQLAsset> | null = null;
  return () => {
    asset ??= (async () => {
      const html = await render();
      const identity = Buffer.from(html, "utf8");
      const [gz, br] = await Promise.all([
        gzipped(identity, { level: 9 }),
        brotli(identity, {
          params: {
            [constants.BROTLI_PARAM_QUALITY]: 7,
            [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
          },
        }),
      ]);
      return {
        etag: `"${createHash("sha256").update(identity).digest("base64url").slice(0, 27)}"`,
        csp: pageCsp(html),
        identity,
        gzip: gz,
        br,
      };
    })();
    // A failed render is tried again on the next visit.
    asset.catch(() => {
      asset = null;
    });
    return asset;
  };
}

/** The encoding to send for an Accept-Encoding header: br, else gzip, else none. */
export function chooseEncoding(acceptEncoding: string | undefined): Encoding {
  const accepted = new Map<string, number>();
  for (const part of (acceptEncoding ?? "").split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    if (!name) continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    accepted.set(name, q ? Number(q.slice(2)) || 0 : 1);
  }
  const ok = (name: string) => (accepted.get(name) ?? accepted.get("*") ?? 0) > 0;
  if (ok("br")) return "br";
  if (ok("gzip")) return "gzip";
  return "identity";
}

/** Whether an If-None-Match header names this ETag (or is `*`). */
export function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  return ifNoneMatch
    .split(",")
    .map((t) => t.trim().replace(/^W\//, ""))
    .some((t) => t === etag || t === "*");
}
