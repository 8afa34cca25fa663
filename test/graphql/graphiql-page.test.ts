// GraphiQL's page is not an unauthenticated memory or CPU sink (issue 18 §3, issue 35 §6): a small
// page rendered once and served from cached buffers, precompressed (gzip, brotli), revalidated with
// an ETag (304), with its own Content-Security-Policy; its scripts and styles are immutable files
// sent only compressed when large (406 otherwise), and every visit spends the client's anonymous
// window.
import { brotliDecompressSync, gunzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

const ANONYMOUS_PER_MINUTE = 6;

describe("GraphiQL's page", () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, RATE_LIMIT_ANONYMOUS_PER_MINUTE: String(ANONYMOUS_PER_MINUTE) },
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  const visit = (headers: Record<string, string>, ip = "10.0.0.1") =>
    t.app.inject({
      method: "GET",
      url: "/graphql",
      remoteAddress: ip,
      headers: { accept: "text/html", ...headers },
    });

  it("is a small page, compressed when the browser accepts it, revalidated by ETag, with its own CSP", async () => {
    const plain = await visit({}, "10.0.0.1");
    expect(plain.statusCode).toBe(200);
    expect(plain.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(plain.headers["content-encoding"]).toBeUndefined();
    // The 9 MB of scripts and styles are files of their own: the page is a few KB.
    expect(plain.rawPayload.length).toBeLessThan(8 * 1024);
    expect(plain.body).toMatch(/<script src="\/graphiql\/assets\/graphiql-[\w-]+\.js"><\/script>/);
    expect(plain.body).toMatch(/<link rel="stylesheet" href="\/graphiql\/assets\/graphiql-[\w-]+\.css" \/>/);
    expect(plain.body).not.toContain("data:image");
    // Subscriptions over the WebSocket, the Headers tab's token in connection_init (started through
    // startGraphiQL; test/graphql/graphiql.test.ts runs one in a browser).
    expect(plain.body).toContain('"subscriptionsProtocol":"WS"');
    expect(plain.body).toMatch(/connectionParams: \(\) => \{[\s\S]*authorization[\s\S]*startGraphiQL\(/);
    const etag = plain.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    expect(plain.headers["cache-control"]).toBe("no-cache");
    const csp = plain.headers["content-security-policy"] as string;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("connect-src 'self'");
    // The inline start-up script is allowed by hash, not by 'unsafe-inline'.
    expect(csp).toMatch(/script-src 'self' 'sha256-[A-Za-z0-9+/=]+';/);
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
    expect(plain.headers.vary).toBe("Accept-Encoding");

    const gz = await visit({ "accept-encoding": "gzip, deflate" }, "10.0.0.2");
    expect(gz.statusCode).toBe(200);
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gunzipSync(gz.rawPayload).equals(plain.rawPayload)).toBe(true);
    expect(gz.headers.etag).toBe(etag);

    const br = await visit({ "accept-encoding": "gzip, br" }, "10.0.0.3");
    expect(br.headers["content-encoding"]).toBe("br");
    expect(brotliDecompressSync(br.rawPayload).equals(plain.rawPayload)).toBe(true);

    const again = await visit({ "if-none-match": etag, "accept-encoding": "gzip" }, "10.0.0.4");
    expect(again.statusCode).toBe(304);
    expect(again.rawPayload.length).toBe(0);
    expect(again.headers.etag).toBe(etag);
    const changed = await visit({ "if-none-match": '"something-else"' }, "10.0.0.4");
    expect(changed.statusCode).toBe(200);

    // GraphiQL keeps its document in ?query=: reloaded, the same page (no token asked for).
    const reloaded = await t.app.inject({
      method: "GET",
      url: `/graphql?query=${encodeURIComponent("{ __typename }")}`,
      remoteAddress: "10.0.0.5",
      headers: { accept: "text/html" },
    });
    expect(reloaded.statusCode).toBe(200);
    expect(reloaded.headers.etag).toBe(etag);
  });

  it("its files are immutable, precompressed, and never sent uncompressed when large (406)", async () => {
    const page = (await visit({}, "10.0.2.1")).body;
    const names = [...page.matchAll(/(?:src|href)="\/graphiql\/assets\/([^"]+)"/g)].map((m) => m[1]!);
    expect(names.map((n) => n.split(".").pop()).sort()).toEqual(["css", "ico", "js"]);
    // Each request from a client of its own: the anonymous window (6 a minute here) is not the point.
    let client = 10;
    const file = (name: string, headers: Record<string, string>) =>
      t.app.inject({
        method: "GET",
        url: `/graphiql/assets/${name}`,
        remoteAddress: `10.0.2.${client++}`,
        headers,
      });
    const js = names.find((n) => n.endsWith(".js"))!;
    const gz = await file(js, { "accept-encoding": "gzip" });
    expect(gz.statusCode).toBe(200);
    expect(gz.headers["content-type"]).toBe("text/javascript; charset=utf-8");
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gz.headers["cache-control"]).toBe("public, max-age=31536000, immutable");
    expect(gz.headers.vary).toBe("Accept-Encoding");
    const library = gunzipSync(gz.rawPayload);
    expect(library.length).toBeGreaterThan(1_000_000);
    expect(gz.rawPayload.length).toBeLessThan(library.length / 3);
    const br = await file(js, { "accept-encoding": "br;q=1, gzip;q=0.5" });
    expect(br.headers["content-encoding"]).toBe("br");
    expect(brotliDecompressSync(br.rawPayload).equals(library)).toBe(true);
    // A client that accepts no compression is refused the 8 MB, not sent it.
    const uncompressed: Array<Record<string, string>> = [
      {},
      { "accept-encoding": "identity" },
      { "accept-encoding": "gzip;q=0, br;q=0" },
    ];
    for (const headers of uncompressed) {
      const refused = await file(js, headers);
      expect(refused.statusCode, JSON.stringify(headers)).toBe(406);
      expect(refused.json()).toMatchObject({ code: "NOT_ACCEPTABLE", status: 406 });
      expect(refused.rawPayload.length).toBeLessThan(1024);
    }
    expect((await file(js, { "if-none-match": gz.headers.etag as string })).statusCode).toBe(304);
    // The stylesheet and the icon.
    const css = await file(names.find((n) => n.endsWith(".css"))!, { "accept-encoding": "br" });
    expect([css.statusCode, css.headers["content-type"]]).toEqual([200, "text/css; charset=utf-8"]);
    expect(brotliDecompressSync(css.rawPayload).toString("utf8")).toContain(".graphiql-container");
    const icon = await file(names.find((n) => n.endsWith(".ico"))!, {});
    expect([icon.statusCode, icon.headers["content-type"]]).toEqual([200, "image/x-icon"]);
    expect(icon.rawPayload.length).toBeLessThan(256 * 1024);
    // The other endpoint's page refers to the same files; a name it does not make is 404.
    const other = await t.app.inject({
      method: "GET",
      url: "/api/v4/graphql",
      remoteAddress: "10.0.2.3",
      headers: { accept: "text/html" },
    });
    expect([...other.body.matchAll(/\/graphiql\/assets\/([^"]+)"/g)].map((m) => m[1]!).sort()).toEqual(
      [...names].sort(),
    );
    expect((await file("graphiql-nothing.js", { "accept-encoding": "gzip" })).statusCode).toBe(404);
  });

  it("each visit spends the client's anonymous window: 429 beyond it, other clients unaffected", async () => {
    const statuses: number[] = [];
    for (let i = 0; i < ANONYMOUS_PER_MINUTE + 2; i++) {
      statuses.push((await visit({ "accept-encoding": "gzip" }, "10.0.1.1")).statusCode);
    }
    expect(statuses.slice(0, ANONYMOUS_PER_MINUTE)).toEqual(Array(ANONYMOUS_PER_MINUTE).fill(200));
    const refused = await visit({ "accept-encoding": "gzip" }, "10.0.1.1");
    expect(refused.statusCode).toBe(429);
    expect(refused.json().errors[0].extensions.code).toBe("RATE_LIMIT_EXCEEDED");
    expect(refused.headers["retry-after"]).toBeDefined();
    // 304s count too: revalidating is a visit.
    expect((await visit({ "if-none-match": "*" }, "10.0.1.1")).statusCode).toBe(429);
    expect((await visit({}, "10.0.1.2")).statusCode).toBe(200);
  });
});
