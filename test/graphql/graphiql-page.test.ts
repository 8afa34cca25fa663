// GraphiQL's page is not an unauthenticated memory or CPU sink (issue 18 §3): rendered once and
// served from cached buffers, precompressed (gzip, brotli), revalidated with an ETag (304), with
// its own Content-Security-Policy, and every visit spends the client's anonymous window.
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

  it("is compressed when the browser accepts it, revalidated by ETag, with its own CSP", async () => {
    const plain = await visit({}, "10.0.0.1");
    expect(plain.statusCode).toBe(200);
    expect(plain.headers["content-type"]).toBe("text/html; charset=utf-8");
    expect(plain.headers["content-encoding"]).toBeUndefined();
    const size = plain.rawPayload.length;
    expect(size).toBeGreaterThan(1_000_000);
    const etag = plain.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]+"$/);
    const csp = plain.headers["content-security-policy"] as string;
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("frame-ancestors 'none'");
    expect(csp).toContain("connect-src 'self'");
    // The inline scripts are allowed by hash, not by 'unsafe-inline'.
    expect(csp).toMatch(/script-src 'self'( 'sha256-[A-Za-z0-9+/=]+')+;/);
    expect(csp).not.toMatch(/script-src[^;]*unsafe-inline/);
    expect(plain.headers.vary).toBe("Accept-Encoding");

    const gz = await visit({ "accept-encoding": "gzip, deflate" }, "10.0.0.2");
    expect(gz.statusCode).toBe(200);
    expect(gz.headers["content-encoding"]).toBe("gzip");
    expect(gz.rawPayload.length).toBeLessThan(size / 3);
    expect(gunzipSync(gz.rawPayload).equals(plain.rawPayload)).toBe(true);
    expect(gz.headers.etag).toBe(etag);

    const br = await visit({ "accept-encoding": "gzip, br" }, "10.0.0.3");
    expect(br.headers["content-encoding"]).toBe("br");
    expect(br.rawPayload.length).toBeLessThan(size / 3);
    expect(brotliDecompressSync(br.rawPayload).equals(plain.rawPayload)).toBe(true);

    const again = await visit({ "if-none-match": etag, "accept-encoding": "gzip" }, "10.0.0.4");
    expect(again.statusCode).toBe(304);
    expect(again.rawPayload.length).toBe(0);
    expect(again.headers.etag).toBe(etag);
    const changed = await visit({ "if-none-match": '"something-else"' }, "10.0.0.4");
    expect(changed.statusCode).toBe(200);
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
