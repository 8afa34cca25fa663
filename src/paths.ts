// Where the project's own files are (migrations, the demo data set), found from this module's
// location by walking up to the project's package.json: the same from the TypeScript sources and
// from the bundle `npm start` runs (dist/), which sits at another depth.
import { existsSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

export function projectRoot(from: string = path.dirname(fileURLToPath(import.meta.url))): string {
  for (let dir = from; ; dir = path.dirname(dir)) {
    const manifest = path.join(dir, "package.json");
    if (
      existsSync(manifest) &&
      (JSON.parse(readFileSync(manifest, "utf8")) as { name?: string }).name === "dimensio"
    ) {
      return dir;
    }
    if (path.dirname(dir) === dir) throw new Error(`no Dimensio package.json above ${from}`);
  }
}
