// OpenAPI (decisions.md §16): GET /api/v4/openapi.json for the caller (in the protected scope), and
// a browsable page at /api/v4/docs served from the project's own files (swagger-ui-dist from
// node_modules, no CDN). The page asks for a token, since the document is the caller's. The page
// has no inline script (its own script is /api/v4/docs/page.js) and a Content-Security-Policy.
import { createRequire } from "node:module";
import path from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyPluginAsync } from "fastify";
import { contextOf } from "../http/protected.ts";
import { buildOpenApi } from "../openapi/build.ts";
import type { RouteDeps } from "./deps.ts";

const ASSETS = "/api/v4/docs/assets/";

/**
 * The document's server: PUBLIC_URL, or "/" (relative to where the document was fetched). Never the
 * request's Host header, which any client sets (a document cached or shared would send its reader's
 * token to whatever host the first caller named).
 */
function serverUrl(publicUrl: string | null): string {
  return publicUrl ?? "/";
}

export const openApiRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services }) => {
  app.get("/api/v4/openapi.json", async (request) =>
    buildOpenApi(services.metadata.current(), contextOf(request), serverUrl(services.config.publicUrl)),
  );
};

/**
 * The page's Content-Security-Policy: its own scripts and styles only (no inline script, no eval,
 * nothing from elsewhere), requests to this origin only, never framed. Styles may be inline: Swagger
 * UI sets some as it renders; images may be data: URLs (its stylesheet's icons).
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Dimensio REST v4</title>
<link rel="stylesheet" href="${ASSETS}swagger-ui.css">
<link rel="stylesheet" href="/api/v4/docs/page.css">
</head>
<body>
<form id="token-form">
  <label for="token">Access token (POST /auth/login):</label>
  <input id="token" name="token" autocomplete="off" placeholder="eyJhbGciOi...">
  <button type="submit">Load my API</button>
</form>
<div id="message"></div>
<div id="swagger-ui"></div>
<script src="${ASSETS}swagger-ui-bundle.js"></script>
<script src="/api/v4/docs/page.js"></script>
</body>
</html>
`;

const PAGE_CSS = `body { margin: 0; font-family: sans-serif; }
#token-form { padding: 12px 20px; background: #1b1b1b; color: #eee; display: flex; gap: 8px; align-items: center; }
#token-form input { flex: 1; padding: 6px; font-family: monospace; }
#message { padding: 8px 20px; color: #b00; }
`;

const PAGE_JS = `"use strict";
(function () {
  const form = document.getElementById("token-form");
  const input = document.getElementById("token");
  const message = document.getElementById("message");
  input.value = sessionStorage.getItem("dimensio-token") || "";
  async function load(token) {
    message.textContent = "";
    const res = await fetch("/api/v4/openapi.json", { headers: { authorization: "Bearer " + token } });
    if (!res.ok) { message.textContent = "The API description could not be loaded (" + res.status + ")."; return; }
    sessionStorage.setItem("dimensio-token", token);
    const spec = await res.json();
    window.ui = SwaggerUIBundle({
      spec, dom_id: "#swagger-ui", validatorUrl: null,
      requestInterceptor: (req) => { req.headers.Authorization = "Bearer " + token; return req; },
    });
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); if (input.value.trim()) load(input.value.trim()); });
  if (input.value) load(input.value);
})();
`;

/** The page and its assets: no token (the page asks for one). Registered outside the protected scope. */
export const openApiPageRoutes: FastifyPluginAsync = async (app) => {
  const require = createRequire(import.meta.url);
  const root = path.dirname(require.resolve("swagger-ui-dist/package.json"));
  await app.register(fastifyStatic, {
    root,
    prefix: ASSETS,
    decorateReply: false,
    allowedPath: (pathName) => /^\/[\w.-]+\.(js|css|png)$/.test(pathName),
  });
  app.get("/api/v4/docs", async (_request, reply) =>
    reply
      .header("content-security-policy", DOCS_CSP)
      .header("x-content-type-options", "nosniff")
      .header("referrer-policy", "no-referrer")
      .type("text/html; charset=utf-8")
      .send(PAGE),
  );
  app.get("/api/v4/docs/page.js", async (_request, reply) =>
    reply
      .header("x-content-type-options", "nosniff")
      .header("cache-control", "no-cache")
      .type("text/javascript; charset=utf-8")
      .send(PAGE_JS),
  );
  app.get("/api/v4/docs/page.css", async (_request, reply) =>
    reply
      .header("x-content-type-options", "nosniff")
      .header("cache-control", "no-cache")
      .type("text/css; charset=utf-8")
      .send(PAGE_CSS),
  );
};
