// Key material for tokens: the HS256 secret (JWT_SECRET, or a random one generated once and kept
// in DATA_DIR) and the RS256 public keys of JWT_PUBLIC_KEYS (a JWKS file).
import { randomBytes } from "node:crypto";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { createLocalJWKSet } from "jose";
import { ConfigError, readPublicKeySet } from "../config.ts";
import type { Config } from "../types.ts";

export const SECRET_FILE_NAME = "jwt-secret";

export type PublicKeyResolver = ReturnType<typeof createLocalJWKSet>;

/** The HS256 signing secret. When JWT_SECRET is unset, reads DATA_DIR/jwt-secret, creating it once. */
export async function loadSigningSecret(config: Config): Promise<Uint8Array> {
  if (config.jwt.secret) return new TextEncoder().encode(config.jwt.secret);
  const file = path.join(config.dataDir, SECRET_FILE_NAME);
  try {
    const stored = (await readFile(file, "utf8")).trim();
    if (stored.length >= 32) return new TextEncoder().encode(stored);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "ENOENT") throw err;
  }
  await mkdir(config.dataDir, { recursive: true });
  const generated = randomBytes(48).toString("base64url");
  try {
    // "wx": a second process starting at the same moment keeps the first one's secret.
    await writeFile(file, generated, { mode: 0o600, flag: "wx" });
    return new TextEncoder().encode(generated);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
    return new TextEncoder().encode((await readFile(file, "utf8")).trim());
  }
}

/**
 * The RS256 verification keys of the JWKS file at JWT_PUBLIC_KEYS, or null when unset. loadConfig
 * checked the file already; one that went bad since is a ConfigError naming the variable all the
 * same (one line at start-up, src/cli/startup-error.ts).
 */
export async function loadPublicKeys(config: Config): Promise<PublicKeyResolver | null> {
  const file = config.jwt.publicKeysPath;
  if (!file) return null;
  try {
    return createLocalJWKSet(readPublicKeySet(file));
  } catch (err) {
    throw new ConfigError([`JWT_PUBLIC_KEYS: ${(err as Error).message}`]);
  }
}
