// A headless Chromium for the browser tests (playwright-core drives it; it downloads no browser).
// In order: TEST_CHROMIUM (a path), the Chromium that the @sparticuz/chromium package ships (Linux
// x64 and arm64: the browser, the NSS/expat libraries it needs, SwiftShader and a font, all
// brotli-compressed in its bin/), then Debian's /usr/bin/chromium. The package's files are unpacked
// once per version into node_modules/.cache/ (about 220 MB, 5-10 s), through a staging directory
// renamed into place, so that runs started together never see half a browser.
import { execFile } from "node:child_process";
import { createReadStream, createWriteStream, existsSync } from "node:fs";
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { pipeline } from "node:stream/promises";
import { promisify } from "node:util";
import { createBrotliDecompress } from "node:zlib";

const ROOT = path.resolve(import.meta.dirname, "../..");
const DEBIAN_CHROMIUM = "/usr/bin/chromium";

export interface ChromiumToLaunch {
  executablePath: string;
  /** The environment to launch it with (the libraries and fonts of the package's build). */
  env: Record<string, string>;
  /** Where it came from, for messages. */
  source: string;
}

function baseEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  return env;
}

/** The package's bin/ folder and version, or null where it is not installed or not for here. */
async function sparticuzPackage(): Promise<{ bin: string; version: string } | null> {
  if (os.platform() !== "linux" || !["x64", "arm64"].includes(os.arch())) return null;
  let entry: string;
  try {
    entry = createRequire(import.meta.url).resolve("@sparticuz/chromium");
  } catch {
    return null;
  }
  // build/index.js; bin/ beside build/ holds the compressed browser (the package's `input` folder).
  const pkgRoot = path.dirname(path.dirname(entry));
  const { version } = JSON.parse(await readFile(path.join(pkgRoot, "package.json"), "utf8")) as {
    version: string;
  };
  return { bin: path.join(pkgRoot, "bin"), version };
}

async function unbrotli(from: string, to: string, mode: number): Promise<void> {
  await pipeline(createReadStream(from), createBrotliDecompress(), createWriteStream(to, { mode }));
}

async function untarBrotli(from: string, dir: string): Promise<void> {
  await mkdir(dir, { recursive: true });
  // Through a file: GNU tar may close its input at the archive's end, before the zero padding.
  const archive = `${dir}.${path.basename(from, ".br")}`;
  await unbrotli(from, archive, 0o644);
  try {
    await promisify(execFile)("tar", ["-x", "-f", archive, "-C", dir]);
  } finally {
    await rm(archive, { force: true });
  }
}

function xmlText(s: string): string {
  return s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

/** Unpacks the package's browser into `dir` (staged, then renamed into place). */
async function unpack(bin: string, dir: string): Promise<void> {
  const staging = `${dir}.staging-${process.pid}-${Date.now()}`;
  await mkdir(staging, { recursive: true });
  try {
    await Promise.all([
      unbrotli(path.join(bin, "chromium.br"), path.join(staging, "chromium"), 0o755),
      // libEGL/libGLESv2/SwiftShader beside the binary, where Chromium looks for them.
      untarBrotli(path.join(bin, "swiftshader.tar.br"), staging),
      untarBrotli(path.join(bin, "al2023.tar.br"), path.join(staging, "al2023")),
      untarBrotli(path.join(bin, "fonts.tar.br"), path.join(staging, "fonts")),
    ]);
    await writeFile(
      path.join(staging, "fonts.conf"),
      `<?xml version="1.0"?>\n<!DOCTYPE fontconfig SYSTEM "fonts.dtd">\n<fontconfig>\n` +
        `  <dir>${xmlText(path.join(dir, "fonts", "fonts"))}</dir>\n` +
        `  <cachedir>${xmlText(path.join(dir, "fonts-cache"))}</cachedir>\n</fontconfig>\n`,
    );
    await rename(staging, dir);
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    // Another run unpacked the same version first: use its copy.
    if (existsSync(path.join(dir, "chromium"))) return;
    throw err;
  }
}

async function sparticuzChromium(): Promise<ChromiumToLaunch | null> {
  const pkg = await sparticuzPackage();
  if (!pkg) return null;
  const uid = typeof process.getuid === "function" ? process.getuid() : 0;
  const dir = path.join(ROOT, "node_modules", ".cache", `sparticuz-chromium-${pkg.version}-${uid}`);
  if (!existsSync(path.join(dir, "chromium"))) await unpack(pkg.bin, dir);
  const env = baseEnv();
  const libs = path.join(dir, "al2023", "lib");
  env.LD_LIBRARY_PATH = env.LD_LIBRARY_PATH ? `${libs}:${env.LD_LIBRARY_PATH}` : libs;
  env.FONTCONFIG_PATH = dir;
  return {
    executablePath: path.join(dir, "chromium"),
    env,
    source: `@sparticuz/chromium ${pkg.version}`,
  };
}

export async function chromiumToLaunch(): Promise<ChromiumToLaunch> {
  const chosen = process.env.TEST_CHROMIUM;
  if (chosen) {
    if (!existsSync(chosen)) throw new Error(`TEST_CHROMIUM names ${chosen}, which does not exist`);
    return { executablePath: chosen, env: baseEnv(), source: `TEST_CHROMIUM (${chosen})` };
  }
  const shipped = await sparticuzChromium();
  if (shipped) return shipped;
  if (existsSync(DEBIAN_CHROMIUM))
    return { executablePath: DEBIAN_CHROMIUM, env: baseEnv(), source: DEBIAN_CHROMIUM };
  throw new Error(
    `no Chromium: @sparticuz/chromium ships one for Linux x64/arm64 only, and ${DEBIAN_CHROMIUM} is ` +
      "missing; set TEST_CHROMIUM to a Chromium or Chrome binary",
  );
}
