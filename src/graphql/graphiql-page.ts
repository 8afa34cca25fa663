// GraphiQL (about 9 MB of bundled scripts and styles, no CDN) as a small page and separate,
// immutable files (issue 18 §3, issue 35 §6). The page yoga's renderGraphiQL makes inlines
// everything; it is split once: its stylesheet, its script library and its icon become files named
// by their content's hash under GRAPHIQL_FILES_PATH (served by graphiqlFileRoutes, cached by
// browsers for a year), and the page keeps only the library's start-up call inline (about 2 KB).
// The page and the files are computed once, gzip and brotli off the event loop (zlib's thread
// pool); every visit sends the same buffers, an ETag answers 304. A file too large to send as is
// (the 8 MB script library) goes only compressed: a client that accepts neither br nor gzip gets
// 406, not 8 MB held in its socket's buffers (every browser accepts gzip). The page carries its own
// Content-Security-Policy: its inline script by hash, connections to this origin only, workers from
// blob: (its editor's language services).
import { createHash } from "node:crypto";
import { promisify } from "node:util";
import { brotliCompress, constants, gzip } from "node:zlib";
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import type { ErrorBody } from "../errors.ts";

const brotli = promisify(brotliCompress);
const gzipped = promisify(gzip);

/** Where GraphiQL's files are served, whatever the endpoint (they are the same for every one). */
export const GRAPHIQL_FILES_PATH = "/graphiql/assets/";

/** A file larger than this is sent only compressed (406 to a client that accepts neither). */
export const GRAPHIQL_IDENTITY_MAX_BYTES = 256 * 1024;

/** Buffers sent as they are: the uncompressed bytes, gzip and brotli, and their ETag. */
export interface Encoded {
  etag: string;
  identity: Buffer;
  gzip: Buffer;
  br: Buffer;
}

/** The page of one endpoint: small, with its CSP. */
export interface GraphiQLAsset extends Encoded {
  csp: string;
  /** The names of the files the page refers to (under GRAPHIQL_FILES_PATH). */
  files: string[];
}

/** One of GraphiQL's files. */
export interface GraphiQLFile extends Encoded {
  name: string;
  type: string;
}

export type Encoding = "br" | "gzip" | "identity";

function sha256(text: string): string {
  return createHash("sha256").update(text).digest("base64");
}

const etagOf = (bytes: Buffer) => `"${createHash("sha256").update(bytes).digest("base64url").slice(0, 27)}"`;

/** The CSP of a page: its inline scripts by hash, everything else from this origin. */
export function pageCsp(html: string): string {
  const scripts = [...html.matchAll(/<script(?:\s[^>]*)?>([\s\S]*?)<\/script>/g)]
    .map((m) => m[1]!)
    .filter((body) => body.trim().length > 0)
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

/** Where the start-up call begins in the page's one script: what precedes it is the library. */
const START_CALL = "YogaGraphiQL.renderYogaGraphiQL(";

/**
 * The page's start-up: GraphiQL with its subscriptions over the WebSocket (renderGraphiQL's
 * `subscriptionsProtocol: "WS"`, graphql-transport-ws on the endpoint's own path). GraphiQL sends
 * its Headers tab with HTTP requests only, and a browser's WebSocket carries no headers: the
 * socket's `connection_init` gets the tab's Authorization through `connectionParams`, called at
 * each connect (a socket opens for a subscription and closes after the last one ends). The tab's
 * text is GraphiQL's own initial one (its stored headers, else the page's default), then each
 * edit or change of tab (`onEditHeaders`).
 */
const START_WITH_SOCKET_TOKEN = `function startGraphiQL(root, options) {
  let headers = options.headers;
  try {
    const stored = localStorage.getItem("graphiql:headers");
    if (stored && stored !== "null" && stored !== "undefined") headers = stored;
  } catch {}
  YogaGraphiQL.renderYogaGraphiQL(root, Object.assign({}, options, {
    onEditHeaders: (text) => {
      headers = text;
    },
    connectionParams: () => {
      let parsed;
      try {
        parsed = JSON.parse(headers || "{}");
      } catch {
        return {};
      }
      if (!parsed || typeof parsed !== "object") return {};
      const name = Object.keys(parsed).find((key) => key.toLowerCase() === "authorization");
      return name === undefined ? {} : { authorization: String(parsed[name]) };
    },
  }));
}
startGraphiQL(`;

export interface SplitPage {
  /** The page, referring to the files by name. */
  html: string;
  files: Array<{ name: string; type: string; body: Buffer }>;
}

function hashedName(stem: string, ext: string, body: Buffer): string {
  return `${stem}-${createHash("sha256").update(body).digest("base64url").slice(0, 16)}.${ext}`;
}

/**
 * renderGraphiQL's page as a small page and its files: the <style> as a stylesheet, the script's
 * library (all but its start-up call, which names the endpoint) as a script, the data: icon as an
 * icon; the start-up call made through START_WITH_SOCKET_TOKEN. A page of another shape is an error
 * (the package changed: the test of the page says so).
 */
export function splitGraphiQLPage(html: string): SplitPage {
  const files: SplitPage["files"] = [];
  const file = (stem: string, ext: string, type: string, body: Buffer) => {
    const name = hashedName(stem, ext, body);
    files.push({ name, type, body });
    return `${GRAPHIQL_FILES_PATH}${name}`;
  };
  let page = html;
  const icon = /<link rel="icon" href="data:image\/x-icon;base64,([A-Za-z0-9+/=]+)"\s*\/?>/.exec(page);
  if (icon) {
    const href = file("favicon", "ico", "image/x-icon", Buffer.from(icon[1]!, "base64"));
    page = page.replace(icon[0], () => `<link rel="icon" href="${href}" />`);
  }
  const style = /<style>([\s\S]*?)<\/style>/.exec(page);
  if (!style) throw new Error("GraphiQL's page has no <style>: @graphql-yoga/render-graphiql changed");
  const cssHref = file("graphiql", "css", "text/css; charset=utf-8", Buffer.from(style[1]!, "utf8"));
  page = page.replace(style[0], () => `<link rel="stylesheet" href="${cssHref}" />`);
  const open = page.indexOf("<script>");
  const start = page.lastIndexOf(START_CALL);
  const close = page.indexOf("</script>", start);
  if (open < 0 || start < open || close < 0)
    throw new Error(
      "GraphiQL's page has no script ending in its start-up call: @graphql-yoga/render-graphiql changed",
    );
  const library = page.slice(open + "<script>".length, start);
  const jsHref = file("graphiql", "js", "text/javascript; charset=utf-8", Buffer.from(library, "utf8"));
  const startup = START_WITH_SOCKET_TOKEN + page.slice(start + START_CALL.length, close);
  page = `${page.slice(0, open)}<script src="${jsHref}"></script>\n      <script>${startup}</script>${page.slice(close + "</script>".length)}`;
  return { html: page, files };
}

async function encode(identity: Buffer): Promise<Encoded> {
  const [gz, br] = await Promise.all([
    gzipped(identity, { level: 9 }),
    brotli(identity, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: 7,
        [constants.BROTLI_PARAM_SIZE_HINT]: identity.length,
      },
    }),
  ]);
  return { etag: etagOf(identity), identity, gzip: gz, br };
}

/** Computed once on first use; concurrent first uses share the work, a failure is tried again. */
function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | null = null;
  return () => {
    made ??= make();
    made.catch(() => {
      made = null;
    });
    return made;
  };
}

/** The page's buffers (the page without its files), computed once. */
export function graphiqlAsset(render: () => Promise<string>): () => Promise<GraphiQLAsset> {
  return once(async () => {
    const { html, files } = splitGraphiQLPage(await render());
    const page = await encode(Buffer.from(html, "utf8"));
    return { ...page, csp: pageCsp(html), files: files.map((f) => f.name) };
  });
}

/** The files' buffers, computed once: by name. */
export function graphiqlFiles(render: () => Promise<string>): () => Promise<Map<string, GraphiQLFile>> {
  return once(async () => {
    const { files } = splitGraphiQLPage(await render());
    const encoded = await Promise.all(
      files.map(async (f) => ({ name: f.name, type: f.type, ...(await encode(f.body)) })),
    );
    return new Map(encoded.map((f) => [f.name, f]));
  });
}

/** Sends `body` in the encoding the request accepts, or 304 for its ETag; headers set before. */
function sendEncoded(request: FastifyRequest, reply: FastifyReply, body: Encoded, type: string) {
  reply
    .header("etag", body.etag)
    .header("vary", "Accept-Encoding")
    .header("x-content-type-options", "nosniff");
  if (notModified(request.headers["if-none-match"], body.etag)) return reply.status(304).send();
  const encoding = chooseEncoding(request.headers["accept-encoding"]);
  if (encoding === "identity" && body.identity.length > GRAPHIQL_IDENTITY_MAX_BYTES) {
    return reply.status(406).send({
      error: "NotAcceptable",
      message: `This file is ${body.identity.length} bytes uncompressed and is sent only compressed: send Accept-Encoding: gzip or br.`,
      code: "NOT_ACCEPTABLE",
      status: 406,
    } satisfies ErrorBody);
  }
  if (encoding !== "identity") reply.header("content-encoding", encoding);
  return reply.type(type).send(body[encoding]);
}

/** Sends GraphiQL's page (revalidated by ETag: it names the files of this version). */
export function sendGraphiQLPage(request: FastifyRequest, reply: FastifyReply, page: GraphiQLAsset) {
  reply
    .header("cache-control", "no-cache")
    .header("content-security-policy", page.csp)
    .header("referrer-policy", "no-referrer");
  return sendEncoded(request, reply, page, "text/html; charset=utf-8");
}

export interface GraphiQLFileRoutesOptions {
  /** Renders GraphiQL's page (any endpoint: the files do not depend on it); yoga's by default. */
  render?: () => Promise<string>;
  /** Spends the client's anonymous window (a request without a token), as the page does. */
  spendAnonymous: (request: FastifyRequest, reply: FastifyReply) => Promise<void>;
}

/** GET GRAPHIQL_FILES_PATH:name: GraphiQL's files, immutable (their names change with them). */
export const graphiqlFileRoutes: FastifyPluginAsync<GraphiQLFileRoutesOptions> = async (app, opts) => {
  const files = graphiqlFiles(
    opts.render ??
      (async () => {
        const { renderGraphiQL } = await import("@graphql-yoga/render-graphiql");
        return renderGraphiQL({ endpoint: "/graphql" });
      }),
  );
  app.get<{ Params: { name: string } }>(`${GRAPHIQL_FILES_PATH}:name`, async (request, reply) => {
    await opts.spendAnonymous(request, reply);
    const file = (await files()).get(request.params.name);
    if (!file) {
      return reply.status(404).send({
        error: "NotFound",
        message: `GraphiQL has no file ${request.params.name}.`,
        code: "NOT_FOUND",
        status: 404,
      } satisfies ErrorBody);
    }
    reply.header("cache-control", "public, max-age=31536000, immutable");
    return sendEncoded(request, reply, file, file.type);
  });
};

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
