// Access tokens (jose): HS256 tokens this service issues, and RS256 tokens verified with the keys
// of JWT_PUBLIC_KEYS. Validation follows spec 5.1.3 in order: three parts, signature, exp, nbf,
// iss. Time comes from the injected clock, never from jose's own Date.now.
import { randomUUID } from "node:crypto";
import { compactVerify, decodeProtectedHeader, type JWTPayload, SignJWT } from "jose";
import { AuthenticationError } from "../errors.ts";
import type { PublicKeyResolver } from "./keys.ts";

/** The custom claims of spec 2.6 (grants are left out: they live in the session). */
export interface SessionClaims {
  sub: string;
  user_id: string;
  tenant_id: string;
  sessionId: string;
  source: string | null;
  centro_dett: string | null;
  peso: string;
  ambiente: string | null;
  lingua: string | null;
}

export interface VerifiedToken {
  alg: "HS256" | "RS256";
  claims: JWTPayload & Record<string, unknown>;
  /** Issued-at in epoch seconds (0 when the token has none). */
  iat: number;
}

export interface IssuedToken {
  token: string;
  iat: number;
  exp: number;
}

export interface TokenServiceOptions {
  secret: Uint8Array;
  publicKeys: PublicKeyResolver | null;
  issuer: string;
  audience: string | null;
  /** Seconds a token stays valid after issue: the active plus the renewable window. */
  lifetimeS: number;
  clock: () => Date;
}

export interface TokenService {
  issue(claims: SessionClaims): Promise<IssuedToken>;
  /** Verifies an access token (HS256 or RS256), issuer included. */
  verifyAccess(token: string): Promise<VerifiedToken>;
  /** Verifies an outside token for token exchange: RS256 with JWT_PUBLIC_KEYS, exp and nbf. */
  verifyExternal(token: string): Promise<VerifiedToken>;
}

const invalid = (message: string) => new AuthenticationError("TOKEN_INVALID", message);

function epochSeconds(d: Date): number {
  return Math.floor(d.getTime() / 1000);
}

/** Tokens whose signature was checked, kept so that a token's signature is checked once. */
const SIGNATURE_CACHE_SIZE = 10_000;

export function createTokenService(opts: TokenServiceOptions): TokenService {
  // Signature and payload of a token never change: checked once, remembered (bounded, oldest out).
  // Expiry and nbf depend on the clock and are checked on every use; the session behind the token
  // is looked up on every request all the same, so revocation is not affected.
  const signed = new Map<string, { alg: "HS256" | "RS256"; claims: JWTPayload & Record<string, unknown> }>();

  async function verify(token: string, allowed: ReadonlyArray<"HS256" | "RS256">): Promise<VerifiedToken> {
    let known = signed.get(token);
    if (!known) {
      known = await verifySignature(token, allowed);
      if (signed.size >= SIGNATURE_CACHE_SIZE) signed.delete(signed.keys().next().value as string);
      signed.set(token, known);
    } else if (!allowed.includes(known.alg)) {
      throw invalid(`The token algorithm ${known.alg} is not accepted here.`);
    }
    return checkTimes(known.alg, known.claims);
  }

  async function verifySignature(
    token: string,
    allowed: ReadonlyArray<"HS256" | "RS256">,
  ): Promise<{ alg: "HS256" | "RS256"; claims: JWTPayload & Record<string, unknown> }> {
    const parts = token.split(".");
    if (parts.length !== 3 || parts.some((p) => p === "")) {
      throw invalid("The token is malformed: a JWT has three dot-separated parts.");
    }
    let alg: unknown;
    try {
      alg = decodeProtectedHeader(token).alg;
    } catch {
      throw invalid("The token header is malformed.");
    }
    if (alg !== "HS256" && alg !== "RS256")
      throw invalid(`The token algorithm ${String(alg)} is not accepted.`);
    if (!allowed.includes(alg)) throw invalid(`The token algorithm ${alg} is not accepted here.`);
    const publicKeys = opts.publicKeys;
    if (alg === "RS256" && !publicKeys)
      throw invalid("RS256 tokens are not accepted: no public keys are set.");

    let payloadBytes: Uint8Array;
    try {
      const verified =
        alg === "HS256"
          ? await compactVerify(token, opts.secret, { algorithms: ["HS256"] })
          : await compactVerify(token, publicKeys!, { algorithms: ["RS256"] });
      payloadBytes = verified.payload;
    } catch {
      throw invalid("The token signature is not valid.");
    }
    let claims: JWTPayload & Record<string, unknown>;
    try {
      const parsed: unknown = JSON.parse(new TextDecoder().decode(payloadBytes));
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("not an object");
      claims = parsed as JWTPayload & Record<string, unknown>;
    } catch {
      throw invalid("The token payload is not a JSON object.");
    }
    return { alg, claims };
  }

  function checkTimes(alg: "HS256" | "RS256", claims: JWTPayload & Record<string, unknown>): VerifiedToken {
    const now = epochSeconds(opts.clock());
    if (typeof claims.exp !== "number") throw invalid("The token has no expiry (exp).");
    if (claims.exp <= now) {
      throw new AuthenticationError("TOKEN_EXPIRED", "The token has expired.", {
        extra: { expired_at: new Date(claims.exp * 1000).toISOString() },
      });
    }
    if (claims.nbf !== undefined && (typeof claims.nbf !== "number" || claims.nbf > now)) {
      throw invalid("The token is not valid yet (nbf).");
    }
    return { alg, claims, iat: typeof claims.iat === "number" ? claims.iat : 0 };
  }

  const checkAudience = (claims: { aud?: string | string[] }) => {
    if (opts.audience === null) return;
    const aud = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
    if (!aud.includes(opts.audience)) throw invalid("The token audience is not accepted.");
  };

  return {
    async issue(c) {
      const iat = epochSeconds(opts.clock());
      const exp = iat + opts.lifetimeS;
      const payload: Record<string, unknown> = {
        user_id: c.user_id,
        tenant_id: c.tenant_id,
        sessionId: c.sessionId,
        peso: c.peso,
      };
      for (const key of ["source", "centro_dett", "ambiente", "lingua"] as const) {
        const value = c[key];
        if (value !== null) payload[key] = value;
      }
      const token = await new SignJWT(payload)
        .setProtectedHeader({ alg: "HS256", typ: "JWT" })
        .setIssuer(opts.issuer)
        .setSubject(c.sub)
        .setAudience(opts.audience ?? opts.issuer)
        .setIssuedAt(iat)
        .setNotBefore(iat)
        .setExpirationTime(exp)
        .setJti(randomUUID())
        .sign(opts.secret);
      return { token, iat, exp };
    },

    async verifyAccess(token) {
      const verified = await verify(token, ["HS256", "RS256"]);
      const { claims } = verified;
      if (claims.iss !== opts.issuer) throw invalid("The token issuer is not accepted.");
      checkAudience(claims);
      if (typeof claims.sessionId !== "string" || claims.sessionId === "") {
        throw invalid("The token carries no sessionId.");
      }
      return verified;
    },

    async verifyExternal(token) {
      // An identity provider's token is exchanged only when minted for this service: with
      // JWT_AUDIENCE set, its aud must name it.
      const verified = await verify(token, ["RS256"]);
      checkAudience(verified.claims);
      return verified;
    },
  };
}
