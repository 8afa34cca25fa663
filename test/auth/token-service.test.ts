// The token service and key loading as plain functions: audience, lifetime, claim order, and
// start-up errors for a bad JWT_PUBLIC_KEYS.
import { createHmac } from "node:crypto";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { decodeJwt, SignJWT } from "jose";
import { describe, expect, it } from "vitest";
import { loadPublicKeys } from "../../src/auth/keys.ts";
import { createTokenService } from "../../src/auth/tokens.ts";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { ApiError } from "../../src/errors.ts";
import { rsaKeysWithJwksFile, signRs256 } from "../helpers/auth.ts";
import { manualClock } from "../helpers/env.ts";

const secret = new TextEncoder().encode("unit-secret-unit-secret-unit-secret-0123");
const claims = {
  sub: "anna",
  user_id: "anna",
  tenant_id: "acme",
  sessionId: "11111111-1111-1111-1111-111111111111",
  source: null,
  centro_dett: "HQ",
  peso: "1",
  ambiente: null,
  lingua: "it",
};

async function code(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (err) {
    if (err instanceof ApiError) return err.code;
    throw err;
  }
  return "OK";
}

describe("token service", () => {
  it("a token checked once is still checked against the clock on every use, and a changed token is checked anew", async () => {
    const clock = manualClock();
    const tokens = createTokenService({
      secret,
      publicKeys: null,
      issuer: "dimensio",
      audience: null,
      lifetimeS: 60,
      clock,
    });
    const { token } = await tokens.issue(claims);
    expect(await code(tokens.verifyAccess(token))).toBe("OK");
    expect(await code(tokens.verifyAccess(token))).toBe("OK");
    // Another signature over the same header and payload: refused, whatever the cache holds.
    const [h, p] = token.split(".");
    const forged = `${h}.${p}.${createHmac("sha256", "another-secret-another-secret-0123").update(`${h}.${p}`).digest("base64url")}`;
    expect(await code(tokens.verifyAccess(forged))).toBe("TOKEN_INVALID");
    clock.advance(61_000);
    expect(await code(tokens.verifyAccess(token))).toBe("TOKEN_EXPIRED");
    // External tokens are RS256 only: the cached HS256 token is not one.
    expect(await code(tokens.verifyExternal(token))).toBe("TOKEN_INVALID");
  });

  it("issues HS256 tokens with iss, aud, iat, nbf, exp and jti, and leaves null claims out", async () => {
    const clock = manualClock();
    const tokens = createTokenService({
      secret,
      publicKeys: null,
      issuer: "dimensio",
      audience: "api",
      lifetimeS: 4500,
      clock,
    });
    const { token, iat, exp } = await tokens.issue(claims);
    const c = decodeJwt(token);
    expect(c).toMatchObject({ iss: "dimensio", aud: "api", sub: "anna", iat, nbf: iat, exp });
    expect(exp - iat).toBe(4500);
    expect(c).not.toHaveProperty("source");
    expect(c).not.toHaveProperty("ambiente");
    expect((await tokens.verifyAccess(token)).claims.user_id).toBe("anna");
    clock.advance(4500_000);
    expect(await code(tokens.verifyAccess(token))).toBe("TOKEN_EXPIRED");
  });

  it("checks the audience when JWT_AUDIENCE is set", async () => {
    const clock = manualClock();
    const issuerOnly = createTokenService({
      secret,
      publicKeys: null,
      issuer: "dimensio",
      audience: null,
      lifetimeS: 60,
      clock,
    });
    const strict = createTokenService({
      secret,
      publicKeys: null,
      issuer: "dimensio",
      audience: "api",
      lifetimeS: 60,
      clock,
    });
    const { token } = await issuerOnly.issue(claims);
    expect(decodeJwt(token).aud).toBe("dimensio");
    expect(await code(issuerOnly.verifyAccess(token))).toBe("OK");
    expect(await code(strict.verifyAccess(token))).toBe("TOKEN_INVALID");
  });

  it("with JWT_AUDIENCE set, an external RS256 token is exchanged only when its aud names it", async () => {
    const clock = manualClock();
    const keys = await rsaKeysWithJwksFile();
    const publicKeys = await loadPublicKeys(loadConfig({ JWT_PUBLIC_KEYS: keys.jwksFile }));
    const service = (audience: string | null) =>
      createTokenService({ secret, publicKeys, issuer: "dimensio", audience, lifetimeS: 60, clock });
    const now = Math.floor(clock().getTime() / 1000);
    const forApi = await signRs256(keys.privateKey, { sub: "marco", aud: "api" }, { now });
    const forOther = await signRs256(keys.privateKey, { sub: "marco", aud: "other-app" }, { now });
    const noAud = await signRs256(keys.privateKey, { sub: "marco" }, { now });
    expect(await code(service("api").verifyExternal(forApi))).toBe("OK");
    expect(await code(service("api").verifyExternal(forOther))).toBe("TOKEN_INVALID");
    expect(await code(service("api").verifyExternal(noAud))).toBe("TOKEN_INVALID");
    expect(await code(service(null).verifyExternal(forOther))).toBe("OK");
  });

  it("checks in the order of spec 5.1.3: signature before exp, exp before nbf and iss", async () => {
    const clock = manualClock();
    const tokens = createTokenService({
      secret,
      publicKeys: null,
      issuer: "dimensio",
      audience: null,
      lifetimeS: 60,
      clock,
    });
    const now = Math.floor(clock().getTime() / 1000);
    const sign = (c: Record<string, unknown>, key = secret) =>
      new SignJWT(c).setProtectedHeader({ alg: "HS256" }).sign(key);
    const other = new TextEncoder().encode("other-secret-other-secret-other-secret-01");
    expect(
      await code(tokens.verifyAccess(await sign({ exp: now - 1, iss: "x", sessionId: "s" }, other))),
    ).toBe("TOKEN_INVALID");
    expect(
      await code(tokens.verifyAccess(await sign({ exp: now - 1, nbf: now + 10, iss: "x", sessionId: "s" }))),
    ).toBe("TOKEN_EXPIRED");
    expect(await code(tokens.verifyAccess(await sign({ iss: "dimensio", sessionId: "s" })))).toBe(
      "TOKEN_INVALID",
    );
    expect(await code(tokens.verifyAccess(await sign({ exp: now + 60, iss: "dimensio" })))).toBe(
      "TOKEN_INVALID",
    );
    expect(
      await code(tokens.verifyAccess(await sign({ exp: now + 60, iss: "dimensio", sessionId: "s" }))),
    ).toBe("OK");
    const notObject = `${Buffer.from('{"alg":"HS256"}').toString("base64url")}.${Buffer.from("[1]").toString("base64url")}`;
    const sig = createHmac("sha256", Buffer.from(secret)).update(notObject).digest("base64url");
    expect(await code(tokens.verifyAccess(`${notObject}.${sig}`))).toBe("TOKEN_INVALID");
  });

  it("refuses RS256 tokens when no public keys are set", async () => {
    const tokens = createTokenService({
      secret,
      publicKeys: null,
      issuer: "dimensio",
      audience: null,
      lifetimeS: 60,
      clock: manualClock(),
    });
    const header = Buffer.from('{"alg":"RS256"}').toString("base64url");
    expect(await code(tokens.verifyAccess(`${header}.e30.c2ln`))).toBe("TOKEN_INVALID");
    expect(await code(tokens.verifyExternal(`${header}.e30.c2ln`))).toBe("TOKEN_INVALID");
  });
});

describe("JWT_PUBLIC_KEYS", () => {
  it("is optional", async () => {
    expect(await loadPublicKeys(loadConfig({}))).toBeNull();
  });

  it("a missing or malformed file stops start-up with a message naming the variable", async () => {
    const dir = await mkdtemp(path.join(tmpdir(), "dimensio-keys-"));
    const notJwks = path.join(dir, "not-jwks.json");
    await writeFile(notJwks, JSON.stringify({ kty: "RSA" }));
    const garbage = path.join(dir, "garbage.json");
    await writeFile(garbage, "{nope");
    // loadConfig refuses it (before anything is opened); a file gone bad after loadConfig is a
    // ConfigError naming the variable all the same (one line at start-up, not a stack trace).
    const good = (await rsaKeysWithJwksFile()).jwksFile;
    for (const file of [path.join(dir, "absent.json"), notJwks, garbage]) {
      expect(() => loadConfig({ JWT_PUBLIC_KEYS: file })).toThrow(ConfigError);
      expect(() => loadConfig({ JWT_PUBLIC_KEYS: file })).toThrow(/JWT_PUBLIC_KEYS: /);
      const config = loadConfig({ JWT_PUBLIC_KEYS: good });
      const later = { ...config, jwt: { ...config.jwt, publicKeysPath: file } };
      const err = await loadPublicKeys(later).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).problems).toEqual([expect.stringMatching(/^JWT_PUBLIC_KEYS: .*\.json/)]);
    }
  });
});
