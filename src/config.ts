// Reads and validates the environment into a typed Config. A bad value stops start-up with a
// message that names the variable (ConfigError).
import { readFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { JSONWebKeySet } from "jose";
import { z } from "zod";
import { readTrustedDocuments } from "./graphql/persisted.ts";
import type { Config, DatabaseProfileConfig, Role } from "./types.ts";

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join("\n")}`);
    this.name = "ConfigError";
  }
}

const ROLES = ["all", "gateway", "read", "write", "auth", "relay", "webhooks"] as const;

const optionalString = z
  .string()
  .optional()
  .transform((v) => (v === undefined || v.trim() === "" ? null : v.trim()));

const url = (protocols: string[]) =>
  optionalString.refine(
    (v) => {
      if (v === null) return true;
      try {
        return protocols.includes(new URL(v).protocol);
      } catch {
        return false;
      }
    },
    { message: `must be a URL (${protocols.join(" or ")})` },
  );

/**
 * The largest value of a PostgreSQL integer (statement_timeout and the other timeouts are such),
 * and of a Node timer's delay: setTimeout fires at once (after a warning) past it.
 */
export const INT32_MAX = 2_147_483_647;

/** Seconds a token or session may last: now plus this stays a valid Date and JWT `exp`. */
export const TOKEN_LIFETIME_MAX_S = INT32_MAX;

/**
 * A whole number from `min` to `max`: the caller's refinements say what `min` means; past `max`
 * (what its consumer takes: PostgreSQL's integer, a timer's delay, a safe integer) it is refused,
 * naming the range. `min` is only told, not checked here.
 */
const nonNegativeInt = (fallback: number, max: number, min = 0) =>
  optionalString.transform((v, ctx) => {
    if (v === null) return fallback;
    if (!/^\d+$/.test(v)) {
      ctx.addIssue({ code: "custom", message: `must be a whole number >= 0, got "${v}"` });
      return z.NEVER;
    }
    const n = Number(v);
    if (n > max) {
      ctx.addIssue({ code: "custom", message: `must be between ${min} and ${max}, got "${v}"` });
      return z.NEVER;
    }
    return n;
  });

/** A whole number whose refinement below gives its whole range. */
const refined = (fallback: number) => nonNegativeInt(fallback, Number.POSITIVE_INFINITY);

/**
 * Each of the webhook worker's bounds: it claims `concurrency × per receiver` rows in one
 * statement, as a PostgreSQL integer.
 */
export const WEBHOOK_CONCURRENCY_MAX = 10_000;

/** lru-cache allocates a tenant's registrations' slots up front, this many per tenant. */
export const PERSISTED_MAX_PER_TENANT_MAX = 100_000;

/** PostgreSQL stores no field value larger than 1 GB. */
export const FIELD_MAX_BYTES_MAX = 1_073_741_823;

/** Published outbox rows kept at most 100 years: `now() - retention` stays a timestamp. */
export const EVENTS_RETENTION_MAX_MS = 100 * 365 * 24 * 3600 * 1000;

/** Durations given to a timer (setTimeout, setInterval) or to PostgreSQL as a timeout. */
const ms = (fallback: number, min = 0) => nonNegativeInt(fallback, INT32_MAX, min);
/** Counts (rows, requests, sockets, …): an int4 in any statement they reach. */
const count = (fallback: number, min = 0) => nonNegativeInt(fallback, INT32_MAX, min);
/** Sizes in bytes, compared in memory only. */
const bytes = (fallback: number, min = 0) => nonNegativeInt(fallback, Number.MAX_SAFE_INTEGER, min);

const bool = (fallback: boolean) =>
  optionalString.transform((v, ctx) => {
    if (v === null) return fallback;
    const s = v.toLowerCase();
    if (["1", "true", "yes", "on"].includes(s)) return true;
    if (["0", "false", "no", "off"].includes(s)) return false;
    ctx.addIssue({ code: "custom", message: `must be true or false, got "${v}"` });
    return z.NEVER;
  });

/** "10.0.0.0/8", "2001:db8::1", or one of proxy-addr's names. */
function proxyEntryValid(entry: string): boolean {
  if (["loopback", "linklocal", "uniquelocal"].includes(entry)) return true;
  const [address = "", prefix, extra] = entry.split("/");
  const family = net.isIP(address);
  if (!family || extra !== undefined) return false;
  return prefix === undefined || (/^\d+$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

/** No request passes more hops than an IP packet's TTL allows. */
const TRUST_PROXY_MAX_HOPS = 255;

/**
 * TRUST_PROXY: which peers may name the client in X-Forwarded-For. Unset (or false): none, the
 * socket's peer is the client. A number: that many proxies in front. Else a comma-separated list
 * of the proxies' addresses or CIDRs. "true" (anyone) is refused: any client could then choose
 * its own address and escape the per-address login lock and rate limits.
 */
const trustProxy = optionalString.transform((v, ctx): false | number | string[] => {
  if (v === null || ["false", "0", "no", "off"].includes(v.toLowerCase())) return false;
  if (/^\d+$/.test(v)) {
    if (Number(v) <= TRUST_PROXY_MAX_HOPS) return Number(v);
    ctx.addIssue({
      code: "custom",
      message: `the number of proxies in front must be between 0 and ${TRUST_PROXY_MAX_HOPS}, got "${v}"`,
    });
    return z.NEVER;
  }
  const entries = v
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  if (entries.length && entries.every(proxyEntryValid)) return entries;
  ctx.addIssue({
    code: "custom",
    message: `must be the number of proxies in front, or a comma-separated list of the proxies' addresses or CIDRs (or loopback, linklocal, uniquelocal); trusting every peer ("true") is not offered; got "${v}"`,
  });
  return z.NEVER;
});

const jsonRoutes = optionalString.transform((v, ctx) => {
  if (v === null) return {} as Record<string, string>;
  try {
    const parsed: unknown = JSON.parse(v);
    const routes = z.record(z.string(), z.string().url()).parse(parsed);
    return routes;
  } catch {
    ctx.addIssue({
      code: "custom",
      message: 'must be a JSON object of name to URL, e.g. {"orders":"http://..."}',
    });
    return z.NEVER;
  }
});

const envSchema = z.object({
  NODE_ENV: optionalString.transform((v) => v ?? "production"),
  HOST: optionalString.transform((v) => v ?? "0.0.0.0"),
  PORT: refined(8080).refine((n) => n <= 65535, { message: "must be a port number (0-65535)" }),
  LOG_LEVEL: optionalString
    .transform((v) => v ?? "info")
    .refine((v) => ["fatal", "error", "warn", "info", "debug", "trace", "silent"].includes(v), {
      message: "must be one of fatal, error, warn, info, debug, trace, silent",
    }),
  DATA_DIR: optionalString.transform((v) => path.resolve(v ?? "./data")),
  DATABASE_URL: url(["postgres:", "postgresql:"]),
  DATABASE_READ_URL: url(["postgres:", "postgresql:"]),
  DATABASE_LISTEN_URL: url(["postgres:", "postgresql:"]),
  DATABASE_POOL_MODE: optionalString
    .transform((v) => v ?? "session")
    .refine((v) => v === "session" || v === "transaction", {
      message: "must be session or transaction (transaction: behind PgBouncer in transaction pooling mode)",
    }),
  AMQP_URL: url(["amqp:", "amqps:"]),
  REDIS_URL: url(["redis:", "rediss:"]),
  EVENTS_EXCHANGE: optionalString.transform((v) => v ?? "dimensio.events"),
  S3_ENDPOINT: url(["http:", "https:"]),
  S3_BUCKET: optionalString,
  S3_REGION: optionalString.transform((v) => v ?? "us-east-1"),
  S3_ACCESS_KEY_ID: optionalString,
  S3_SECRET_ACCESS_KEY: optionalString,
  S3_FORCE_PATH_STYLE: bool(false),
  JWT_SECRET: optionalString.refine((v) => v === null || v.length >= 32, {
    message: "must be at least 32 characters (an HS256 key)",
  }),
  JWT_ISSUER: optionalString.transform((v) => v ?? "dimensio"),
  JWT_AUDIENCE: optionalString,
  JWT_PUBLIC_KEYS: optionalString,
  RATE_LIMIT_USER_PER_SECOND: count(10),
  RATE_LIMIT_USER_PER_MINUTE: count(100),
  RATE_LIMIT_USER_PER_HOUR: count(1000),
  RATE_LIMIT_TENANT_PER_MINUTE: count(1000),
  RATE_LIMIT_TENANT_PER_HOUR: count(10000),
  RATE_LIMIT_ANONYMOUS_PER_MINUTE: count(600),
  LOGIN_RATE_LIMIT_PER_IP_PER_MINUTE: count(60),
  LOGIN_RATE_LIMIT_PER_USERNAME_PER_MINUTE: count(20),
  ACCESS_TOKEN_ACTIVE_S: nonNegativeInt(900, TOKEN_LIFETIME_MAX_S),
  ACCESS_TOKEN_RENEWABLE_S: nonNegativeInt(3600, TOKEN_LIFETIME_MAX_S),
  REFRESH_TOKEN_TTL_S: nonNegativeInt(2592000, TOKEN_LIFETIME_MAX_S),
  WEBHOOK_RETRY_BASE_MS: ms(1000),
  WEBHOOK_ALLOW_PRIVATE: bool(false),
  WEBHOOK_CONCURRENCY: nonNegativeInt(32, WEBHOOK_CONCURRENCY_MAX, 1).refine((n) => n >= 1, {
    message: "must be at least 1",
  }),
  WEBHOOK_CONCURRENCY_PER_RECEIVER: nonNegativeInt(4, WEBHOOK_CONCURRENCY_MAX, 1).refine((n) => n >= 1, {
    message: "must be at least 1",
  }),
  WEBHOOK_CONCURRENCY_PER_TENANT: nonNegativeInt(8, WEBHOOK_CONCURRENCY_MAX, 1).refine((n) => n >= 1, {
    message: "must be at least 1",
  }),
  WEBHOOK_MAX_PER_TENANT: count(100, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  DB_ANALYZE_INTERVAL_MS: ms(60_000).refine((n) => n === 0 || n >= 1000, {
    message: "must be 0 (never) or at least 1000",
  }),
  MEDIA_MAX_BYTES: bytes(10 * 1024 * 1024, 1024).refine((n) => n >= 1024, {
    message: "must be at least 1024",
  }),
  MEDIA_UPLOADS_PER_USER: count(4, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  MEDIA_UPLOADS_PER_TENANT: count(16, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  MEDIA_ALLOWED_TYPES: optionalString.transform((v) =>
    (v ?? "image/png,image/jpeg,image/webp,image/gif,application/pdf")
      .split(",")
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  ),
  EVENTS_BATCH_SIZE: refined(100).refine((n) => n >= 1 && n <= 10_000, {
    message: "must be between 1 and 10000",
  }),
  EVENTS_POLL_MS: ms(5000, 10).refine((n) => n >= 10, { message: "must be at least 10" }),
  EVENTS_GATHER_MS: refined(50).refine((n) => n <= 1000, { message: "must be at most 1000" }),
  EVENTS_RETENTION_MS: nonNegativeInt(7 * 24 * 3600 * 1000, EVENTS_RETENTION_MAX_MS),
  EVENTS_MAX_FAILURES: count(5, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  EVENTS_MEMORY_QUEUE_MAX: count(10_000, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  HISTORY_RETENTION_DAYS: refined(365).refine((n) => n <= 1_000_000, {
    message: "must be at most 1000000",
  }),
  HISTORY_PRUNE_INTERVAL_MS: ms(3_600_000).refine((n) => n === 0 || n >= 1000, {
    message: "must be 0 (never) or at least 1000",
  }),
  ROLE: optionalString
    .transform((v) => (v ?? "all") as Role)
    .refine((v) => (ROLES as readonly string[]).includes(v), {
      message: `must be one of ${ROLES.join(", ")}`,
    }),
  READ_BACKEND_URL: url(["http:", "https:"]),
  WRITE_BACKEND_URL: url(["http:", "https:"]),
  AUTH_BACKEND_URL: url(["http:", "https:"]),
  CANARY_READ_URL: url(["http:", "https:"]),
  CANARY_WRITE_URL: url(["http:", "https:"]),
  MICROSERVICE_ROUTES: jsonRoutes,
  DEVELOPER_ROUTES: jsonRoutes,
  GATEWAY_SECRET: optionalString,
  METRICS_TOKEN: optionalString.refine((v) => v === null || v.length >= 16, {
    message: "must be at least 16 characters",
  }),
  TRUST_PROXY: trustProxy,
  BACKEND_TIMEOUT_MS: ms(30_000, 10).refine((n) => n >= 10, { message: "must be at least 10" }),
  PUBLIC_URL: url(["http:", "https:"]).transform((v) => (v === null ? null : v.replace(/\/+$/, ""))),
  CORS_ORIGINS: optionalString.transform((v) =>
    v === null || v === "*" ? (true as const) : v.split(",").map((s) => s.trim()),
  ),
  DEMO_DATA: bool(true),
  MAX_BATCH_SIZE: count(500, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  CREATE_GROUP_MAX_ROWS: refined(32).refine((n) => n >= 1 && n <= 1000, {
    message: "must be between 1 and 1000",
  }),
  BODY_LIMIT_BYTES: bytes(10 * 1024 * 1024, 1024).refine((n) => n >= 1024, {
    message: "must be at least 1024",
  }),
  IMPORT_MAX_BYTES: bytes(100 * 1024 * 1024, 1024).refine((n) => n >= 1024, {
    message: "must be at least 1024",
  }),
  IMPORT_ATOMIC_MAX_ROWS: count(10_000, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  IMPORT_WRITE_TIMEOUT_MS: ms(600_000, 100).refine((n) => n >= 100, {
    message: "must be at least 100",
  }),
  IMPORT_SPOOL_DIR: optionalString.transform((v) => path.resolve(v ?? os.tmpdir())),
  IMPORT_SPOOL_MAX_BYTES: bytes(1024 * 1024 * 1024, 1024).refine((n) => n >= 1024, {
    message: "must be at least 1024",
  }),
  INDEX_BUILD_TIMEOUT_MS: ms(3_600_000).refine((n) => n === 0 || n >= 1000, {
    message: "must be 0 (no limit) or at least 1000",
  }),
  REQUEST_TIMEOUT_MS: ms(30_000, 100).refine((n) => n >= 100, { message: "must be at least 100" }),
  STATEMENT_TIMEOUT_MS: ms(30_000, 100).refine((n) => n >= 100, { message: "must be at least 100" }),
  DATABASE_CONNECT_TIMEOUT_MS: ms(5_000, 100).refine((n) => n >= 100, {
    message: "must be at least 100",
  }),
  DATABASE_WATCHDOG_MS: ms(2_000).refine((n) => n === 0 || n >= 100, {
    message: "must be 0 (off) or at least 100",
  }),
  SESSION_CACHE_MS: refined(5_000).refine((n) => n <= 60_000, { message: "must be at most 60000" }),
  COUNT_EXACT_LIMIT: count(10_000, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  COUNT_CACHE_MS: ms(5_000),
  GRAPHQL_MAX_DEPTH: count(10, 2).refine((n) => n >= 2, { message: "must be at least 2" }),
  GRAPHQL_MAX_COST: count(1000, 10).refine((n) => n >= 10, { message: "must be at least 10" }),
  GRAPHQL_MAX_ALIASES: count(100),
  GRAPHQL_MAX_NODES: count(100_000, 100).refine((n) => n >= 100, { message: "must be at least 100" }),
  GRAPHQL_TENANT_STATEMENTS: count(0),
  GRAPHQL_MAX_DOCUMENT_BYTES: refined(65_536).refine((n) => n >= 1024 && n <= 1_048_576, {
    message: "must be between 1024 and 1048576",
  }),
  GRAPHQL_DOCUMENT_CACHE_BYTES: bytes(16_777_216),
  GRAPHQL_MAX_BODY_BYTES: bytes(2_097_152, 65_536).refine((n) => n >= 65_536, {
    message: "must be at least 65536",
  }),
  GRAPHQL_PERSISTED_MAX_PER_TENANT: nonNegativeInt(1000, PERSISTED_MAX_PER_TENANT_MAX),
  GRAPHQL_PERSISTED_MAX_BYTES_PER_TENANT: bytes(4_194_304),
  GRAPHQL_TRUSTED_DOCUMENTS: optionalString,
  GRAPHQL_TRUSTED_ONLY: bool(false),
  GRAPHQL_PLANNED_EXECUTION: bool(true),
  HEAVY_REQUEST_VALUES: count(5_000),
  TENANT_HEAVY_REQUESTS: count(1, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  TENANT_HEAVY_WAITING: count(32),
  HEAVY_BODY_BYTES: bytes(262_144),
  TENANT_BODY_BUFFER_BYTES: bytes(64 * 1024 * 1024, 1024),
  SUBSCRIPTIONS_MAX_PER_USER: count(20, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  SUBSCRIPTIONS_MAX_PER_PROCESS: count(2000, 1).refine((n) => n >= 1, {
    message: "must be at least 1",
  }),
  SUBSCRIPTIONS_MAX_PER_TENANT: count(500, 1).refine((n) => n >= 1, {
    message: "must be at least 1",
  }),
  WS_MAX_BUFFERED_BYTES: bytes(1_048_576, 1024).refine((n) => n >= 1024, {
    message: "must be at least 1024",
  }),
  WS_KEEPALIVE_MS: ms(12_000),
  WS_MAX_SOCKETS_PER_USER: count(20, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  WS_MAX_SOCKETS_PER_TENANT: count(1000, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  WS_MAX_SOCKETS: count(10_000, 1).refine((n) => n >= 1, { message: "must be at least 1" }),
  FIELD_MAX_BYTES: nonNegativeInt(1024 * 1024, FIELD_MAX_BYTES_MAX, 1).refine((n) => n >= 1, {
    message: "must be at least 1",
  }),
  REQUEST_EVENTS_MAX_BYTES: bytes(16 * 1024 * 1024, 1024).refine((n) => n >= 1024, {
    message: "must be at least 1024",
  }),
});

/**
 * The JWKS of JWT_PUBLIC_KEYS, from the text of `file`: an object with a `keys` array of objects,
 * each with its `kty`. Throws an Error saying what is wrong (the caller names the variable).
 */
function parsePublicKeySet(text: string, file: string): JSONWebKeySet {
  let jwks: unknown;
  try {
    jwks = JSON.parse(text);
  } catch (err) {
    throw new Error(`${file} is not JSON: ${(err as Error).message}`);
  }
  const keys = (jwks as { keys?: unknown } | null)?.keys;
  if (!jwks || typeof jwks !== "object" || !Array.isArray(keys))
    throw new Error(`${file} is not a JWKS ({"keys": [...]})`);
  if (!keys.every((k) => k && typeof k === "object" && typeof (k as { kty?: unknown }).kty === "string"))
    throw new Error(
      `${file} is not a JWKS: each of its "keys" must be a JSON Web Key (an object with "kty")`,
    );
  return jwks as JSONWebKeySet;
}

/** Reads and checks the JWKS file of JWT_PUBLIC_KEYS (loadConfig at start-up, src/auth/keys.ts). */
export function readPublicKeySet(file: string): JSONWebKeySet {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new Error(
      `cannot read a JWKS from ${file} (${code === "ENOENT" ? "no such file" : (code ?? (err as Error).message)})`,
    );
  }
  return parsePublicKeySet(text, file);
}

export interface LoadConfigOptions {
  /**
   * The caller opens the database the config names (src/main.ts), rather than handing
   * openServices one of its own (`opts.db`: the tests' in-process apps): ROLE=read, write and
   * auth then need DATABASE_URL.
   */
  opensDatabase?: boolean;
}

/** The API roles of a split deployment, each a process of its own behind the gateway. */
const SPLIT_API_ROLES = ["read", "write", "auth"];

/** Rules between variables, read from the raw environment so they are listed with the others. */
function crossProblems(env: Record<string, string | undefined>, opts: LoadConfigOptions): string[] {
  const given = (name: string) => (env[name] ?? "").trim() !== "";
  const role = (env.ROLE ?? "").trim() || "all";
  const problems: string[] = [];
  // The API roles run as processes apart that must share one database: on the embedded default
  // each would start its own private PGlite in its DATA_DIR, and a record written through the
  // write process would never be read through the read process, nor a login's session found.
  if (opts.opensDatabase && SPLIT_API_ROLES.includes(role) && !given("DATABASE_URL"))
    problems.push(
      `DATABASE_URL: required when ROLE is read, write or auth (the processes of a split deployment share one PostgreSQL; on the embedded database each would have a private one of its own)`,
    );
  if (role === "gateway") {
    for (const key of ["READ_BACKEND_URL", "WRITE_BACKEND_URL", "AUTH_BACKEND_URL"]) {
      if (!given(key)) problems.push(`${key}: required when ROLE=gateway`);
    }
  }
  // The relay and the webhook worker run apart from the API (docs/deploy.md): on the embedded
  // database and the in-process bus, what they publish or await would reach no other process.
  if (role === "relay" || role === "webhooks") {
    const missing = ["DATABASE_URL", "AMQP_URL"].filter((key) => !given(key));
    if (missing.length)
      problems.push(
        `ROLE: ${role} runs apart from the API and needs DATABASE_URL (the PostgreSQL it shares) and AMQP_URL (RabbitMQ; the in-process event bus reaches no other process); not set: ${missing.join(", ")}`,
      );
  }
  const apiRoles = ["gateway", "read", "write", "auth"];
  if (apiRoles.includes(role) && !given("GATEWAY_SECRET"))
    problems.push("GATEWAY_SECRET: required when ROLE is gateway, read, write or auth");
  // Through PgBouncer's transaction pooling the one LISTEN connection (metadata changes, sessions,
  // the relays' wake-ups) would land on a server connection other clients then use.
  if (
    (env.DATABASE_POOL_MODE ?? "").trim() === "transaction" &&
    given("DATABASE_URL") &&
    !given("DATABASE_LISTEN_URL")
  )
    problems.push(
      "DATABASE_LISTEN_URL: required with DATABASE_POOL_MODE=transaction: a direct connection to PostgreSQL (not through PgBouncer) for the process's LISTEN",
    );
  // Processes apart must sign and check tokens with one key: a secret generated in one process's
  // DATA_DIR would make every token it issues invalid for the others.
  if (SPLIT_API_ROLES.includes(role) && !given("JWT_SECRET"))
    problems.push(
      `JWT_SECRET: required when ROLE is read, write or auth (the same secret in every process: a generated one is this process's own, and the others would refuse its tokens)`,
    );
  if (
    ["1", "true", "yes", "on"].includes((env.GRAPHQL_TRUSTED_ONLY ?? "").trim().toLowerCase()) &&
    !given("GRAPHQL_TRUSTED_DOCUMENTS")
  )
    problems.push("GRAPHQL_TRUSTED_DOCUMENTS: required when GRAPHQL_TRUSTED_ONLY=true");
  if (given("S3_ENDPOINT") && !given("S3_BUCKET"))
    problems.push("S3_BUCKET: required when S3_ENDPOINT is set");
  return problems;
}

/**
 * What a process of `config` is told at start-up, logged as warnings (nothing here stops it).
 * ROLE=read and write serve GraphQL subscriptions, whose events come from the bus: without
 * AMQP_URL that is the in-process bus, which only a relay in the same process feeds, and these
 * roles run none (the relay is ROLE=relay's): every subscription on them would wait in silence.
 * Not a refusal: their reads and writes need no broker, and a deployment without subscriptions
 * runs them without RabbitMQ.
 */
export function startupWarnings(config: Pick<Config, "role" | "amqpUrl">): string[] {
  if ((config.role === "read" || config.role === "write") && config.amqpUrl === null)
    return [
      `ROLE=${config.role} without AMQP_URL: GraphQL subscriptions on this process receive no events (the in-process event bus is fed only by a relay in the same process, and ROLE=${config.role} runs none); set AMQP_URL to the RabbitMQ the relay (ROLE=relay) publishes to`,
    ];
  return [];
}

const PROFILE_URL = /^DATABASE_URL_(.+)$/i;
const PROFILE_READ_URL = /^DATABASE_READ_URL_(.+)$/i;
const PROFILE_LISTEN_URL = /^DATABASE_LISTEN_URL_(.+)$/i;
/** A profile's name: an identifier, compared and kept upper-case. */
const PROFILE_NAME = /^[A-Z][A-Z0-9_]{0,62}$/;

/**
 * The database profiles of the environment (decisions.md §18): DATABASE_URL_<NAME>, the
 * optional DATABASE_READ_URL_<NAME> and DATABASE_LISTEN_URL_<NAME> (LISTEN's direct connection
 * when DATABASE_URL_<NAME> is a PgBouncer). Problems (a bad name or URL, a read URL without its profile,
 * the reserved name MAIN) are added to `problems`, each naming its variable.
 */
export function databaseProfiles(
  env: Record<string, string | undefined>,
  problems: string[],
): Record<string, DatabaseProfileConfig> {
  const profiles: Record<string, DatabaseProfileConfig> = {};
  const extraUrls: Array<[string, string, string, "readUrl" | "listenUrl"]> = [];
  const isPostgresUrl = (v: string) => {
    try {
      return ["postgres:", "postgresql:"].includes(new URL(v).protocol);
    } catch {
      return false;
    }
  };
  for (const [key, raw] of Object.entries(env)) {
    const value = (raw ?? "").trim();
    const read = PROFILE_READ_URL.exec(key);
    const listen = read ? null : PROFILE_LISTEN_URL.exec(key);
    const main = read || listen ? null : PROFILE_URL.exec(key);
    const match = read ?? listen ?? main;
    if (!match || value === "") continue;
    const name = match[1]!.toUpperCase();
    if (!PROFILE_NAME.test(name)) {
      problems.push(`${key}: the profile name must be a letter then letters, digits or _ (at most 63)`);
      continue;
    }
    if (name === "MAIN") {
      problems.push(`${key}: MAIN is the main database (DATABASE_URL), not a profile name`);
      continue;
    }
    if (!isPostgresUrl(value)) {
      problems.push(`${key}: must be a postgres:// or postgresql:// URL`);
      continue;
    }
    if (read || listen) extraUrls.push([key, name, value, read ? "readUrl" : "listenUrl"]);
    else if (profiles[name]) problems.push(`${key}: profile ${name} is configured twice`);
    else profiles[name] = { url: value, readUrl: null, listenUrl: null };
  }
  for (const [key, name, value, which] of extraUrls) {
    const profile = profiles[name];
    if (profile) profile[which] = value;
    else problems.push(`${key}: DATABASE_URL_${name} is not set`);
  }
  return profiles;
}

export function loadConfig(
  env: Record<string, string | undefined> = process.env,
  opts: LoadConfigOptions = {},
): Config {
  const parsed = envSchema.safeParse(env);
  const problems = parsed.success ? [] : parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`);
  problems.push(...crossProblems(env, opts));
  const profiles = databaseProfiles(env, problems);
  // The trusted documents are read here, at start-up: a bad file stops it, naming the variable.
  let trustedDocuments: Map<string, string> | null = null;
  if (parsed.success && parsed.data.GRAPHQL_TRUSTED_DOCUMENTS !== null) {
    try {
      trustedDocuments = readTrustedDocuments(parsed.data.GRAPHQL_TRUSTED_DOCUMENTS);
    } catch (err) {
      problems.push(`GRAPHQL_TRUSTED_DOCUMENTS: ${(err as Error).message}`);
    }
  }
  // So is JWT_PUBLIC_KEYS's JWKS, before anything is opened (src/auth/keys.ts reads it again).
  // Read from the raw value: listed with the other variables' problems.
  const publicKeys = (env.JWT_PUBLIC_KEYS ?? "").trim();
  if (publicKeys !== "") {
    try {
      readPublicKeySet(publicKeys);
    } catch (err) {
      problems.push(`JWT_PUBLIC_KEYS: ${(err as Error).message}`);
    }
  }
  if (!parsed.success || problems.length) throw new ConfigError(problems);
  const e = parsed.data;

  return {
    nodeEnv: e.NODE_ENV,
    host: e.HOST,
    port: e.PORT,
    logLevel: e.LOG_LEVEL,
    dataDir: e.DATA_DIR,
    databaseUrl: e.DATABASE_URL,
    databaseReadUrl: e.DATABASE_READ_URL,
    databaseListenUrl: e.DATABASE_LISTEN_URL,
    databasePoolMode: e.DATABASE_POOL_MODE as "session" | "transaction",
    databaseProfiles: profiles,
    amqpUrl: e.AMQP_URL,
    redisUrl: e.REDIS_URL,
    eventsExchange: e.EVENTS_EXCHANGE,
    s3: {
      endpoint: e.S3_ENDPOINT,
      bucket: e.S3_BUCKET,
      region: e.S3_REGION,
      accessKeyId: e.S3_ACCESS_KEY_ID,
      secretAccessKey: e.S3_SECRET_ACCESS_KEY,
      forcePathStyle: e.S3_FORCE_PATH_STYLE,
    },
    jwt: {
      secret: e.JWT_SECRET,
      issuer: e.JWT_ISSUER,
      audience: e.JWT_AUDIENCE,
      publicKeysPath: e.JWT_PUBLIC_KEYS,
    },
    rateLimit: {
      userPerSecond: e.RATE_LIMIT_USER_PER_SECOND,
      userPerMinute: e.RATE_LIMIT_USER_PER_MINUTE,
      userPerHour: e.RATE_LIMIT_USER_PER_HOUR,
      tenantPerMinute: e.RATE_LIMIT_TENANT_PER_MINUTE,
      tenantPerHour: e.RATE_LIMIT_TENANT_PER_HOUR,
      anonymousPerMinute: e.RATE_LIMIT_ANONYMOUS_PER_MINUTE,
    },
    loginRateLimit: {
      perIpPerMinute: e.LOGIN_RATE_LIMIT_PER_IP_PER_MINUTE,
      perUsernamePerMinute: e.LOGIN_RATE_LIMIT_PER_USERNAME_PER_MINUTE,
    },
    accessTokenActiveS: e.ACCESS_TOKEN_ACTIVE_S,
    accessTokenRenewableS: e.ACCESS_TOKEN_RENEWABLE_S,
    refreshTokenTtlS: e.REFRESH_TOKEN_TTL_S,
    webhookRetryBaseMs: e.WEBHOOK_RETRY_BASE_MS,
    webhookAllowPrivate: e.WEBHOOK_ALLOW_PRIVATE,
    webhookConcurrency: e.WEBHOOK_CONCURRENCY,
    webhookConcurrencyPerReceiver: e.WEBHOOK_CONCURRENCY_PER_RECEIVER,
    webhookConcurrencyPerTenant: e.WEBHOOK_CONCURRENCY_PER_TENANT,
    webhookMaxPerTenant: e.WEBHOOK_MAX_PER_TENANT,
    dbAnalyzeIntervalMs: e.DB_ANALYZE_INTERVAL_MS,
    media: {
      maxBytes: e.MEDIA_MAX_BYTES,
      allowedTypes: e.MEDIA_ALLOWED_TYPES,
      uploadsPerUser: e.MEDIA_UPLOADS_PER_USER,
      uploadsPerTenant: e.MEDIA_UPLOADS_PER_TENANT,
    },
    events: {
      batchSize: e.EVENTS_BATCH_SIZE,
      pollMs: e.EVENTS_POLL_MS,
      gatherMs: e.EVENTS_GATHER_MS,
      retentionMs: e.EVENTS_RETENTION_MS,
      maxFailures: e.EVENTS_MAX_FAILURES,
      memoryQueueMax: e.EVENTS_MEMORY_QUEUE_MAX,
    },
    history: { retentionDays: e.HISTORY_RETENTION_DAYS, pruneIntervalMs: e.HISTORY_PRUNE_INTERVAL_MS },
    role: e.ROLE,
    gateway: {
      readBackendUrl: e.READ_BACKEND_URL,
      writeBackendUrl: e.WRITE_BACKEND_URL,
      authBackendUrl: e.AUTH_BACKEND_URL,
      canaryReadUrl: e.CANARY_READ_URL,
      canaryWriteUrl: e.CANARY_WRITE_URL,
      microserviceRoutes: e.MICROSERVICE_ROUTES,
      developerRoutes: e.DEVELOPER_ROUTES,
      secret: e.GATEWAY_SECRET,
      backendTimeoutMs: e.BACKEND_TIMEOUT_MS,
    },
    metricsToken: e.METRICS_TOKEN,
    corsOrigins: e.CORS_ORIGINS,
    publicUrl: e.PUBLIC_URL,
    trustProxy: e.TRUST_PROXY,
    loadDemoData: e.DEMO_DATA,
    maxBatchSize: e.MAX_BATCH_SIZE,
    createGroupMaxRows: e.CREATE_GROUP_MAX_ROWS,
    bodyLimitBytes: e.BODY_LIMIT_BYTES,
    importMaxBytes: e.IMPORT_MAX_BYTES,
    importAtomicMaxRows: e.IMPORT_ATOMIC_MAX_ROWS,
    importWriteTimeoutMs: e.IMPORT_WRITE_TIMEOUT_MS,
    importSpoolDir: e.IMPORT_SPOOL_DIR,
    importSpoolMaxBytes: e.IMPORT_SPOOL_MAX_BYTES,
    indexBuildTimeoutMs: e.INDEX_BUILD_TIMEOUT_MS,
    requestTimeoutMs: e.REQUEST_TIMEOUT_MS,
    statementTimeoutMs: e.STATEMENT_TIMEOUT_MS,
    databaseConnectTimeoutMs: e.DATABASE_CONNECT_TIMEOUT_MS,
    databaseWatchdogMs: e.DATABASE_WATCHDOG_MS,
    fieldMaxBytes: e.FIELD_MAX_BYTES,
    graphql: {
      maxDepth: e.GRAPHQL_MAX_DEPTH,
      maxCost: e.GRAPHQL_MAX_COST,
      maxAliases: e.GRAPHQL_MAX_ALIASES,
      maxNodes: e.GRAPHQL_MAX_NODES,
      tenantStatements: e.GRAPHQL_TENANT_STATEMENTS,
      maxDocumentBytes: e.GRAPHQL_MAX_DOCUMENT_BYTES,
      documentCacheBytes: e.GRAPHQL_DOCUMENT_CACHE_BYTES,
      maxBodyBytes: e.GRAPHQL_MAX_BODY_BYTES,
      plannedExecution: e.GRAPHQL_PLANNED_EXECUTION,
      persisted: {
        maxPerTenant: e.GRAPHQL_PERSISTED_MAX_PER_TENANT,
        maxBytesPerTenant: e.GRAPHQL_PERSISTED_MAX_BYTES_PER_TENANT,
        trustedDocuments,
        trustedOnly: e.GRAPHQL_TRUSTED_ONLY,
      },
    },
    heavyRequests: {
      thresholdValues: e.HEAVY_REQUEST_VALUES,
      perTenant: e.TENANT_HEAVY_REQUESTS,
      maxWaiting: e.TENANT_HEAVY_WAITING,
      bodyBytes: e.HEAVY_BODY_BYTES,
      bufferBytes: e.TENANT_BODY_BUFFER_BYTES,
    },
    subscriptions: {
      maxPerUser: e.SUBSCRIPTIONS_MAX_PER_USER,
      maxPerProcess: e.SUBSCRIPTIONS_MAX_PER_PROCESS,
      maxPerTenant: e.SUBSCRIPTIONS_MAX_PER_TENANT,
    },
    webSocket: {
      maxBufferedBytes: e.WS_MAX_BUFFERED_BYTES,
      keepAliveMs: e.WS_KEEPALIVE_MS,
      maxSocketsPerUser: e.WS_MAX_SOCKETS_PER_USER,
      maxSocketsPerTenant: e.WS_MAX_SOCKETS_PER_TENANT,
      maxSockets: e.WS_MAX_SOCKETS,
    },
    countExactLimit: e.COUNT_EXACT_LIMIT,
    countCacheMs: e.COUNT_CACHE_MS,
    sessionCacheMs: e.SESSION_CACHE_MS,
    requestEventsMaxBytes: e.REQUEST_EVENTS_MAX_BYTES,
  };
}
