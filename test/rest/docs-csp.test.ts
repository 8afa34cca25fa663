// The Swagger UI page (/api/v4/docs, issue 18 §4) has its own Content-Security-Policy: scripts and
// styles of this origin only, no inline script (the page's own script is /api/v4/docs/page.js), no
// eval, requests to this origin only, never framed. Every script and stylesheet the page names is
// served from here, and page.js still loads the caller's document into Swagger UI.
import vm from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

function directives(csp: string): Map<string, string[]> {
  return new Map(
    csp
      .split(";")
      .map((d) => d.trim().split(/\s+/))
      .filter((d) => d[0])
      .map(([name, ...values]) => [name!, values]),
  );
}

describe("the Swagger UI page's CSP", () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("is sent with the page: own scripts only, no inline script or eval, no framing", async () => {
    const page = await t.app.inject({ method: "GET", url: "/api/v4/docs" });
    expect(page.statusCode).toBe(200);
    expect(page.headers["x-content-type-options"]).toBe("nosniff");
    const csp = directives(String(page.headers["content-security-policy"]));
    expect(csp.get("default-src")).toEqual(["'none'"]);
    expect(csp.get("script-src")).toEqual(["'self'"]);
    expect(csp.get("connect-src")).toEqual(["'self'"]);
    expect(csp.get("frame-ancestors")).toEqual(["'none'"]);
    expect(csp.get("base-uri")).toEqual(["'none'"]);
    expect(csp.get("object-src") ?? csp.get("default-src")).toEqual(["'none'"]);
    for (const values of csp.values()) {
      expect(values).not.toContain("'unsafe-eval'");
      expect(values).not.toContain("*");
    }
  });

  it("has no inline script, and everything it names is served here with its type", async () => {
    const html = (await t.app.inject({ method: "GET", url: "/api/v4/docs" })).body;
    const scripts = [...html.matchAll(/<script\b([^>]*)>([\s\S]*?)<\/script>/g)];
    expect(scripts.length).toBeGreaterThan(0);
    for (const [, attrs, body] of scripts) {
      expect(attrs).toMatch(/\bsrc="\/api\/v4\/docs\//);
      expect(body!.trim()).toBe("");
    }
    expect(html).not.toMatch(/\son[a-z]+\s*=/i);
    expect(html).not.toMatch(/<style\b/i);
    expect(html).not.toMatch(/javascript:/i);
    const named = [...html.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
    expect(named).toContain("/api/v4/docs/page.js");
    for (const url of named) {
      expect(url.startsWith("/")).toBe(true);
      const res = await t.app.inject({ method: "GET", url });
      expect(res.statusCode, url).toBe(200);
      expect(res.headers["content-type"], url).toMatch(url.endsWith(".css") ? /text\/css/ : /javascript/);
    }
  });

  it("page.js loads the document with the token given and hands it to Swagger UI", async () => {
    const js = (await t.app.inject({ method: "GET", url: "/api/v4/docs/page.js" })).body;
    const elements: Record<string, { value: string; textContent: string; addEventListener: () => void }> = {};
    const element = () => ({ value: "", textContent: "", addEventListener: () => {} });
    const fetched: Array<{ url: string; auth: string }> = [];
    let bundle: Record<string, unknown> | null = null;
    const spec = { openapi: "3.1.0", info: { title: "x", version: "1" }, paths: {} };
    const stored = new Map([["dimensio-token", "tok-123"]]);
    const context = {
      document: { getElementById: (id: string) => (elements[id] ??= element()) },
      sessionStorage: {
        getItem: (k: string) => stored.get(k) ?? null,
        setItem: (k: string, v: string) => stored.set(k, v),
      },
      fetch: async (url: string, init: { headers: { authorization: string } }) => {
        fetched.push({ url, auth: init.headers.authorization });
        return { ok: true, status: 200, json: async () => spec };
      },
      SwaggerUIBundle: (opts: Record<string, unknown>) => {
        bundle = opts;
        return {};
      },
      window: {} as Record<string, unknown>,
    };
    vm.runInNewContext(js, context);
    await new Promise((r) => setTimeout(r, 20));
    expect(fetched).toEqual([{ url: "/api/v4/openapi.json", auth: "Bearer tok-123" }]);
    expect(bundle).toMatchObject({ spec, dom_id: "#swagger-ui", validatorUrl: null });
    const intercept = (bundle as unknown as { requestInterceptor: (r: unknown) => unknown })
      .requestInterceptor;
    expect(intercept({ headers: {} })).toEqual({ headers: { Authorization: "Bearer tok-123" } });
  });
});
