// `npm start`: bundles the service's TypeScript (src/main.ts and what it imports from src/; the
// packages stay in node_modules) with esbuild into dist/main.mjs, then runs it in this process.
// Plain node then runs plain JavaScript: no TypeScript loader in the serving process, whose hooks
// run in a thread of their own on Node 20 and cost about 140 MB of RSS (docs/benchmarks.md).
// The bundle is rebuilt at every start (well under a second); it finds migrations and the demo
// data through src/paths.ts, so it may live anywhere under the project. `--build` only builds it
// (images build it once, then run `node dist/main.mjs`).
import { rename } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { build, stop } from "esbuild";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const out = path.join(root, "dist", "main.mjs");
// Written aside and renamed into place: two starts at once never run a half-written bundle.
const written = `${out}.${process.pid}.tmp`;
await build({
  entryPoints: [path.join(root, "src", "main.ts")],
  outfile: written,
  bundle: true,
  platform: "node",
  format: "esm",
  target: `node${process.versions.node.split(".")[0]}`,
  packages: "external",
  // No keepNames: it wraps every function and class made at run time in a call that redefines its
  // name (3 % of a GET by id's CPU); unminified, esbuild keeps names anyway, renaming only the
  // rare symbol two modules both declare.
  logLevel: "warning",
});
await rename(written, out);
await stop();
// Production unless the environment says otherwise, as deploy/Dockerfile sets it (and the
// service's own settings take an unset NODE_ENV): graphql-js drops its development checks (a
// cross-realm test on every failed instanceof), graphql-ws keeps internal error messages out of
// WebSocket close reasons. Set before the bundle loads them: they read it once.
process.env.NODE_ENV ||= "production";
if (!process.argv.includes("--build")) await import(pathToFileURL(out).href);
