// Logs a fixture user in over HTTP and builds the Authorization header, for any test.
import type { AddressInfo } from "node:net";
import { mkdtemp, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import type { FastifyInstance } from "fastify";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { type AuthOptions, createAuth } from "../../src/auth/service.ts";
import { createHeavyRequests } from "../../src/http/heavy-requests.ts";
import { createTenantGate } from "../../src/ratelimit/tenant-gate.ts";
import { buildHttpServer } from "../../src/http/server.ts";
import { authRoutes } from "../../src/rest/auth-routes.ts";
import type { Services } from "../../src/services.ts";

/** POST /auth/login with credentials; returns the access token (throws with the body otherwise). */
export async function loginAs(
  app: FastifyInstance,
  username: string,
  password: string,
  extra: { source?: string; centro_dett?: string } = {},
): Promise<string> {
  const res = await app.inject({
    method: "POST",
    url: "/auth/login",
    payload: { username, password, ...extra },
  });
  if (res.statusCode !== 200) throw new Error(`login of ${username} failed: ${res.statusCode} ${res.body}`);
  return (res.json() as { data: { access_token: string } }).data.access_token;
}

export function bearer(token: string): { authorization: string } {
  return { authorization: `Bearer ${token}` };
}

/** The sample fixture's users (fixtures/sample.json). */
export const SAMPLE_USERS = {
  anna: { username: "anna", password: "anna-secret-1" },
  marco: { username: "marco", password: "marco-secret-2" },
  lucia: { username: "lucia", password: "lucia-secret-3" },
  greta: { username: "greta", password: "greta-secret-4" },
} as const;

export type SampleUser = keyof typeof SAMPLE_USERS;

type SigningKey = Awaited<ReturnType<typeof generateKeyPair>>["privateKey"];

/** An RS256 key pair whose public half is written as a JWKS file (for JWT_PUBLIC_KEYS). */
export async function rsaKeysWithJwksFile(): Promise<{
  privateKey: SigningKey;
  publicKey: SigningKey;
  jwksFile: string;
}> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  const jwk = { ...(await exportJWK(publicKey)), kid: "test-key", alg: "RS256", use: "sig" };
  const dir = await mkdtemp(path.join(tmpdir(), "dimensio-jwks-"));
  const jwksFile = path.join(dir, "jwks.json");
  await writeFile(jwksFile, JSON.stringify({ keys: [jwk] }));
  return { privateKey, publicKey, jwksFile };
}

/** Signs an RS256 token with the given claims; times default to `now` (epoch seconds). */
export function signRs256(
  privateKey: SigningKey,
  claims: Record<string, unknown>,
  times: { now: number; expiresIn?: number; nbf?: number },
): Promise<string> {
  return new SignJWT(claims)
    .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: "test-key" })
    .setIssuedAt(times.now)
    .setNotBefore(times.nbf ?? times.now)
    .setExpirationTime(times.now + (times.expiresIn ?? 600))
    .sign(privateKey);
}

/** Seconds since the epoch of a Date. */
export function epoch(d: Date): number {
  return Math.floor(d.getTime() / 1000);
}

/**
 * An HTTP app with only the auth routes, over existing services, with its own Auth options
 * (login limits, rate-limit key prefix). Closing it closes that Auth, not the services.
 */
export async function buildAuthApp(
  services: Services,
  overrides: Partial<AuthOptions> = {},
): Promise<FastifyInstance> {
  const app = await buildHttpServer({
    config: services.config,
    logger: services.logger,
    readiness: async () => ({}),
  });
  const auth = await createAuth(services, overrides);
  app.addHook("onClose", async () => auth.close());
  await app.register(authRoutes, {
    services,
    auth,
    heavy: createHeavyRequests(services.config.heavyRequests),
    readGate: createTenantGate({ perTenant: 1 }),
  });
  await app.ready();
  return app;
}

/**
 * Environment that switches the request rate limits off. Their windows run on real time, so a test
 * sending more than 10 requests a second as one user would otherwise meet a 429.
 */
export const UNLIMITED_ENV: Record<string, string> = {
  RATE_LIMIT_USER_PER_SECOND: "0",
  RATE_LIMIT_USER_PER_MINUTE: "0",
  RATE_LIMIT_USER_PER_HOUR: "0",
  RATE_LIMIT_TENANT_PER_MINUTE: "0",
  RATE_LIMIT_TENANT_PER_HOUR: "0",
};

/** The app on a real loopback port, logged in as `username`: for benchmarks and real-socket tests. */
export async function listenAndLogin(
  app: FastifyInstance,
  username: string,
  password: string,
): Promise<{ base: string; token: string }> {
  await app.listen({ host: "127.0.0.1", port: 0 });
  const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;
  return { base, token: await loginOverHttp(base, username, password) };
}

/** POST /auth/login on a service over HTTP: the access token (throws on anything but 200). */
export async function loginOverHttp(
  base: string,
  username: string,
  password: string,
  headers: Record<string, string> = {},
): Promise<string> {
  const res = await fetch(`${base}/auth/login`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify({ username, password }),
  });
  if (res.status !== 200) throw new Error(`login of ${username} answered ${res.status}: ${await res.text()}`);
  return ((await res.json()) as { data: { access_token: string } }).data.access_token;
}
