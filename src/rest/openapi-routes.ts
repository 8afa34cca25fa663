// OpenAPI (decisions.md §16): GET /api/v4/openapi.json for the caller (in the protected scope), and
// a browsable page at /api/v4/docs served from the project's own files (swagger-ui-dist from
// node_modules, no CDN). The page asks for a token, since the document is the caller's.
import { createRequire } from "node:module";
import path from "node:path";
import fastifyStatic from "@fastify/static";
import type { FastifyPluginAsync, FastifyRequest } from "fastify";
import { contextOf } from "../http/protected.ts";
import { buildOpenApi } from "../openapi/build.ts";
import type { RouteDeps } from "./deps.ts";

const ASSETS = "/api/v4/docs/assets/";

function serverUrl(request: FastifyRequest): string {
  return `${request.protocol}://${request.host}`;
}

export const openApiRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services }) => {
  app.get("/api/v4/openapi.json", async (request) =>
    buildOpenApi(services.metadata.current(), contextOf(request), serverUrl(request)),
  );
};

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Dimensio REST v4</title>
<link rel="stylesheet" href="${ASSETS}swagger-ui.css">
<style>
  body { margin: 0; font-family: sans-serif; }
  #token-form { padding: 12px 20px; background: #1b1b1b; color: #eee; display: flex; gap: 8px; align-items: center; }
  #token-form input { flex: 1; padding: 6px; font-family: monospace; }
  #message { padding: 8px 20px; color: #b00; }
</style>
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
<script>
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
      spec, dom_id: "#swagger-ui",
      requestInterceptor: (req) => { req.headers.Authorization = "Bearer " + token; return req; },
    });
  }
  form.addEventListener("submit", (e) => { e.preventDefault(); if (input.value.trim()) load(input.value.trim()); });
  if (input.value) load(input.value);
</script>
</body>
</html>
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
  app.get("/api/v4/docs", async (_request, reply) => reply.type("text/html; charset=utf-8").send(PAGE));
};
