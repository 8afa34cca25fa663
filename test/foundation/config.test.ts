// Configuration (decisions.md §1): every variable's embedded default, and each kind of bad value
// refused with a ConfigError whose message names the variable.
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";

function refusal(env: Record<string, string>): ConfigError {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return err as ConfigError;
  }
  throw new Error(`loadConfig accepted ${JSON.stringify(env)}`);
}

describe("loadConfig defaults", () => {
  const config = loadConfig({});

  it("serves on PORT 8080 with an embedded database in ./data, ROLE all", () => {
    expect(config.port).toBe(8080);
    expect(config.dataDir).toBe(path.resolve("./data"));
    expect(config.role).toBe("all");
    expect(config.nodeEnv).toBe("production");
  });

  it("leaves every real component unset (embedded defaults replace them)", () => {
    expect(config.databaseUrl).toBeNull();
    expect(config.databaseReadUrl).toBeNull();
    expect(config.amqpUrl).toBeNull();
    expect(config.redisUrl).toBeNull();
    expect(config.s3).toEqual({
      endpoint: null,
      bucket: null,
      region: "us-east-1",
      accessKeyId: null,
      secretAccessKey: null,
      forcePathStyle: false,
    });
    expect(config.eventsExchange).toBe("dimensio.events");
  });

  it("the relay: batches of 100, a poll every 5 s, and a 50 ms gathering pause under a stream of writes", () => {
    // docs/decisions.md, "The relay gathers under a stream of writes": 50 ms since the event side's
    // cost per batch was measured on 2026-11-27 (20 ms before, 5 ms before that).
    expect(config.events).toMatchObject({ batchSize: 100, pollMs: 5000, gatherMs: 50 });
  });

  it("token settings: no JWT_SECRET (generated later), issuer dimensio", () => {
    expect(config.jwt).toEqual({ secret: null, issuer: "dimensio", audience: null, publicKeysPath: null });
    expect(config.accessTokenActiveS).toBe(900);
    expect(config.accessTokenRenewableS).toBe(3600);
    expect(config.refreshTokenTtlS).toBe(2592000);
  });

  it("limits: the rate-limit windows, webhook retry base and private-address switch", () => {
    expect(config.rateLimit).toEqual({
      userPerSecond: 10,
      userPerMinute: 100,
      userPerHour: 1000,
      tenantPerMinute: 1000,
      tenantPerHour: 10000,
      anonymousPerMinute: 600,
    });
    expect(config.loginRateLimit).toEqual({ perIpPerMinute: 60, perUsernamePerMinute: 20 });
    expect(config.webhookRetryBaseMs).toBe(1000);
    expect(config.webhookAllowPrivate).toBe(false);
  });

  it("gateway settings are empty (the backend timeout is spec 8's 30 s)", () => {
    expect(config.gateway).toEqual({
      backendTimeoutMs: 30_000,
      readBackendUrl: null,
      writeBackendUrl: null,
      authBackendUrl: null,
      canaryReadUrl: null,
      canaryWriteUrl: null,
      microserviceRoutes: {},
      developerRoutes: {},
      secret: null,
    });
  });

  it("an empty variable counts as unset", () => {
    const c = loadConfig({ PORT: "", DATABASE_URL: "  ", ROLE: "" });
    expect(c.port).toBe(8080);
    expect(c.databaseUrl).toBeNull();
    expect(c.role).toBe("all");
  });
});

describe("loadConfig with values", () => {
  it("takes every kind of value", () => {
    const c = loadConfig({
      PORT: "9090",
      DATA_DIR: "/tmp/dimensio-x",
      DATABASE_URL: "postgres://u:p@db:5432/app",
      DATABASE_READ_URL: "postgresql://replica/app",
      AMQP_URL: "amqp://guest:guest@mq:5672",
      REDIS_URL: "redis://cache:6379/0",
      S3_ENDPOINT: "http://s3.local:9000",
      S3_BUCKET: "media",
      S3_FORCE_PATH_STYLE: "true",
      JWT_SECRET: "x".repeat(32),
      JWT_ISSUER: "issuer-x",
      JWT_AUDIENCE: "aud-x",
      RATE_LIMIT_USER_PER_SECOND: "0",
      WEBHOOK_RETRY_BASE_MS: "5",
      WEBHOOK_ALLOW_PRIVATE: "yes",
      ROLE: "read",
      GATEWAY_SECRET: "shared",
      MICROSERVICE_ROUTES: '{"orders":"http://orders:8080"}',
    });
    expect(c.port).toBe(9090);
    expect(c.dataDir).toBe("/tmp/dimensio-x");
    expect(c.databaseUrl).toBe("postgres://u:p@db:5432/app");
    expect(c.databaseReadUrl).toBe("postgresql://replica/app");
    expect(c.amqpUrl).toBe("amqp://guest:guest@mq:5672");
    expect(c.redisUrl).toBe("redis://cache:6379/0");
    expect(c.s3.endpoint).toBe("http://s3.local:9000");
    expect(c.s3.forcePathStyle).toBe(true);
    expect(c.jwt.secret).toBe("x".repeat(32));
    expect(c.jwt.issuer).toBe("issuer-x");
    expect(c.rateLimit.userPerSecond).toBe(0);
    expect(c.webhookRetryBaseMs).toBe(5);
    expect(c.webhookAllowPrivate).toBe(true);
    expect(c.role).toBe("read");
    expect(c.gateway.microserviceRoutes).toEqual({ orders: "http://orders:8080" });
  });

  it("ROLE=gateway with its backend URLs and secret is accepted", () => {
    const c = loadConfig({
      ROLE: "gateway",
      READ_BACKEND_URL: "http://read:8080",
      WRITE_BACKEND_URL: "http://write:8080",
      AUTH_BACKEND_URL: "http://auth:8080",
      GATEWAY_SECRET: "s",
    });
    expect(c.gateway.readBackendUrl).toBe("http://read:8080");
  });
});

describe("loadConfig refuses bad values, naming the variable", () => {
  it.each([
    ["PORT", "abc"],
    ["PORT", "80.5"],
    ["PORT", "-1"],
    ["PORT", "70000"],
    ["RATE_LIMIT_USER_PER_MINUTE", "ten"],
    ["ACCESS_TOKEN_ACTIVE_S", "1e3"],
  ])("%s=%s (not a number in range)", (name, value) => {
    const err = refusal({ [name]: value });
    expect(err.message).toContain(name);
    expect(err.problems.every((p) => p.startsWith(`${name}:`))).toBe(true);
  });

  it.each([
    ["DATABASE_URL", "not a url"],
    ["DATABASE_URL", "mysql://db/app"],
    ["DATABASE_READ_URL", "http://db/app"],
    ["AMQP_URL", "localhost:5672"],
    ["AMQP_URL", "http://mq"],
    ["REDIS_URL", "::::"],
    ["REDIS_URL", "postgres://db"],
    ["S3_ENDPOINT", "s3.local"],
  ])("%s=%s (not a URL of the right kind)", (name, value) => {
    const err = refusal({ [name]: value, S3_BUCKET: "media" });
    expect(err.problems).toHaveLength(1);
    expect(err.problems[0]).toMatch(new RegExp(`^${name}: must be a URL`));
  });

  it("ROLE outside the list", () => {
    const err = refusal({ ROLE: "database" });
    expect(err.problems).toEqual([expect.stringMatching(/^ROLE: must be one of all, gateway, read/)]);
  });

  it("JWT_SECRET shorter than 32 characters", () => {
    const err = refusal({ JWT_SECRET: "short-secret" });
    expect(err.problems).toEqual([expect.stringMatching(/^JWT_SECRET: must be at least 32 characters/)]);
  });

  it.each([
    ["WEBHOOK_ALLOW_PRIVATE", "maybe"],
    ["S3_FORCE_PATH_STYLE", "2"],
    ["DEMO_DATA", "yesno"],
  ])("%s=%s (not a boolean)", (name, value) => {
    const err = refusal({ [name]: value });
    expect(err.problems).toEqual([`${name}: must be true or false, got "${value}"`]);
  });

  it("ROLE=gateway without backend URLs names each missing one", () => {
    const err = refusal({ ROLE: "gateway", GATEWAY_SECRET: "s" });
    expect(err.problems).toEqual([
      "READ_BACKEND_URL: required when ROLE=gateway",
      "WRITE_BACKEND_URL: required when ROLE=gateway",
      "AUTH_BACKEND_URL: required when ROLE=gateway",
    ]);
    expect(err.message).toContain("READ_BACKEND_URL");
  });

  it("ROLE=gateway with only some backend URLs names the missing ones", () => {
    const err = refusal({ ROLE: "gateway", GATEWAY_SECRET: "s", READ_BACKEND_URL: "http://read" });
    expect(err.problems).toEqual([
      "WRITE_BACKEND_URL: required when ROLE=gateway",
      "AUTH_BACKEND_URL: required when ROLE=gateway",
    ]);
  });

  it("a backend role without GATEWAY_SECRET", () => {
    const err = refusal({ ROLE: "write", JWT_SECRET: "x".repeat(32) });
    expect(err.problems).toEqual(["GATEWAY_SECRET: required when ROLE is gateway, read, write or auth"]);
  });

  it("DATABASE_POOL_MODE=transaction without DATABASE_LISTEN_URL (its LISTEN would go through PgBouncer)", () => {
    const pooled = { DATABASE_URL: "postgres://u@pgbouncer:6432/app", DATABASE_POOL_MODE: "transaction" };
    expect(refusal(pooled).problems).toEqual([
      "DATABASE_LISTEN_URL: required with DATABASE_POOL_MODE=transaction: a direct connection to PostgreSQL (not through PgBouncer) for the process's LISTEN",
    ]);
    expect(loadConfig({ ...pooled, DATABASE_LISTEN_URL: "postgres://u@db:5432/app" }).databasePoolMode).toBe(
      "transaction",
    );
  });

  it("a backend or auth role without JWT_SECRET (a generated one would be its own)", () => {
    for (const role of ["read", "write", "auth"]) {
      expect(refusal({ ROLE: role, GATEWAY_SECRET: "shared" }).problems).toEqual([
        "JWT_SECRET: required when ROLE is read, write or auth (the same secret in every process: a generated one is this process's own, and the others would refuse its tokens)",
      ]);
    }
    // The gateway checks no token itself.
    expect(() =>
      loadConfig({
        ROLE: "gateway",
        GATEWAY_SECRET: "shared",
        READ_BACKEND_URL: "http://read",
        WRITE_BACKEND_URL: "http://write",
        AUTH_BACKEND_URL: "http://auth",
      }),
    ).not.toThrow();
  });

  it("MICROSERVICE_ROUTES that is not a JSON object of URLs", () => {
    expect(refusal({ MICROSERVICE_ROUTES: "{bad" }).problems[0]).toMatch(/^MICROSERVICE_ROUTES:/);
    expect(refusal({ DEVELOPER_ROUTES: '{"a":"not a url"}' }).problems[0]).toMatch(/^DEVELOPER_ROUTES:/);
  });

  it("S3_ENDPOINT without S3_BUCKET", () => {
    expect(refusal({ S3_ENDPOINT: "http://s3.local" }).problems).toEqual([
      "S3_BUCKET: required when S3_ENDPOINT is set",
    ]);
  });

  it("SESSION_CACHE_MS: 5 s by default, 0 turns the cache off, above a minute refused", () => {
    expect(loadConfig({}).sessionCacheMs).toBe(5000);
    expect(loadConfig({ SESSION_CACHE_MS: "0" }).sessionCacheMs).toBe(0);
    expect(refusal({ SESSION_CACHE_MS: "120000" }).problems).toEqual([
      "SESSION_CACHE_MS: must be at most 60000",
    ]);
    expect(refusal({ SESSION_CACHE_MS: "-1" }).problems[0]).toMatch(/^SESSION_CACHE_MS:/);
  });

  it("CREATE_GROUP_MAX_ROWS: 32 creates a statement by default, 1 (each alone) to 1000, else refused", () => {
    expect(loadConfig({}).createGroupMaxRows).toBe(32);
    expect(loadConfig({ CREATE_GROUP_MAX_ROWS: "1" }).createGroupMaxRows).toBe(1);
    expect(refusal({ CREATE_GROUP_MAX_ROWS: "0" }).problems).toEqual([
      "CREATE_GROUP_MAX_ROWS: must be between 1 and 1000",
    ]);
    expect(refusal({ CREATE_GROUP_MAX_ROWS: "5000" }).problems).toEqual([
      "CREATE_GROUP_MAX_ROWS: must be between 1 and 1000",
    ]);
  });

  it("BODY_LIMIT_BYTES below 1024", () => {
    expect(refusal({ BODY_LIMIT_BYTES: "10" }).problems).toEqual(["BODY_LIMIT_BYTES: must be at least 1024"]);
  });

  it("IMPORT_WRITE_TIMEOUT_MS: 600 s by default, below 100 ms refused; IMPORT_SPOOL_DIR: the OS's temporary directory by default, made absolute", () => {
    expect(loadConfig({}).importWriteTimeoutMs).toBe(600_000);
    expect(loadConfig({ IMPORT_WRITE_TIMEOUT_MS: "100" }).importWriteTimeoutMs).toBe(100);
    expect(refusal({ IMPORT_WRITE_TIMEOUT_MS: "99" }).problems).toEqual([
      "IMPORT_WRITE_TIMEOUT_MS: must be at least 100",
    ]);
    expect(loadConfig({}).importSpoolDir).toBe(path.resolve(tmpdir()));
    expect(loadConfig({ IMPORT_SPOOL_DIR: "spool" }).importSpoolDir).toBe(path.resolve("spool"));
  });

  it("webhook bounds per tenant and the embedded database's ANALYZE interval (issue 18)", () => {
    const d = loadConfig({});
    expect([d.webhookConcurrencyPerTenant, d.webhookMaxPerTenant, d.dbAnalyzeIntervalMs]).toEqual([
      8, 100, 60_000,
    ]);
    expect(loadConfig({ DB_ANALYZE_INTERVAL_MS: "0" }).dbAnalyzeIntervalMs).toBe(0);
    expect(
      refusal({
        WEBHOOK_CONCURRENCY_PER_TENANT: "0",
        WEBHOOK_MAX_PER_TENANT: "x",
        DB_ANALYZE_INTERVAL_MS: "10",
      }).problems,
    ).toEqual([
      "WEBHOOK_CONCURRENCY_PER_TENANT: must be at least 1",
      'WEBHOOK_MAX_PER_TENANT: must be a whole number >= 0, got "x"',
      "DB_ANALYZE_INTERVAL_MS: must be 0 (never) or at least 1000",
    ]);
  });

  it("lists every bad variable at once", () => {
    const err = refusal({ PORT: "x", AMQP_URL: "nope", ROLE: "bogus", JWT_SECRET: "s" });
    const names = err.problems.map((p) => p.split(":")[0]);
    expect(names.sort()).toEqual(["AMQP_URL", "JWT_SECRET", "PORT", "ROLE"]);
  });

  it("lists a bad value and a missing gateway URL together", () => {
    const err = refusal({ ROLE: "gateway", GATEWAY_SECRET: "s", PORT: "x" });
    const names = err.problems.map((p) => p.split(":")[0]);
    expect(names.sort()).toEqual(["AUTH_BACKEND_URL", "PORT", "READ_BACKEND_URL", "WRITE_BACKEND_URL"]);
  });
});

describe("the maxima of numeric variables: what their consumer takes, refused beyond, naming the range", () => {
  it("PostgreSQL's and the timers' limit (2147483647 ms) for timeouts and intervals", () => {
    expect(loadConfig({ STATEMENT_TIMEOUT_MS: "2147483647" }).statementTimeoutMs).toBe(2_147_483_647);
    expect(refusal({ STATEMENT_TIMEOUT_MS: "3000000000" }).problems).toEqual([
      'STATEMENT_TIMEOUT_MS: must be between 100 and 2147483647, got "3000000000"',
    ]);
    for (const name of [
      "REQUEST_TIMEOUT_MS",
      "DATABASE_CONNECT_TIMEOUT_MS",
      "DATABASE_WATCHDOG_MS",
      "IMPORT_WRITE_TIMEOUT_MS",
      "INDEX_BUILD_TIMEOUT_MS",
      "BACKEND_TIMEOUT_MS",
      "EVENTS_POLL_MS",
      "HISTORY_PRUNE_INTERVAL_MS",
      "DB_ANALYZE_INTERVAL_MS",
      "WEBHOOK_RETRY_BASE_MS",
      "WS_KEEPALIVE_MS",
      "COUNT_CACHE_MS",
    ]) {
      const problems = refusal({ [name]: "2147483648" }).problems;
      expect(problems).toHaveLength(1);
      expect(problems[0]).toMatch(
        new RegExp(`^${name}: must be between \\d+ and 2147483647, got "2147483648"$`),
      );
    }
  });

  it("token lifetimes at 2147483647 s: a number past it is refused, not answered as expires_in", () => {
    expect(loadConfig({ ACCESS_TOKEN_ACTIVE_S: "2147483647" }).accessTokenActiveS).toBe(2_147_483_647);
    expect(
      refusal({
        ACCESS_TOKEN_ACTIVE_S: "99999999999999999999",
        ACCESS_TOKEN_RENEWABLE_S: "2147483648",
        REFRESH_TOKEN_TTL_S: "1e9",
      }).problems,
    ).toEqual([
      'ACCESS_TOKEN_ACTIVE_S: must be between 0 and 2147483647, got "99999999999999999999"',
      'ACCESS_TOKEN_RENEWABLE_S: must be between 0 and 2147483647, got "2147483648"',
      'REFRESH_TOKEN_TTL_S: must be a whole number >= 0, got "1e9"',
    ]);
  });

  it("counts as PostgreSQL integers, sizes as safe integers, and the tighter limits of their consumers", () => {
    expect(refusal({ RATE_LIMIT_USER_PER_HOUR: "2147483648" }).problems).toEqual([
      'RATE_LIMIT_USER_PER_HOUR: must be between 0 and 2147483647, got "2147483648"',
    ]);
    expect(refusal({ MAX_BATCH_SIZE: "99999999999" }).problems).toEqual([
      'MAX_BATCH_SIZE: must be between 1 and 2147483647, got "99999999999"',
    ]);
    expect(loadConfig({ IMPORT_MAX_BYTES: "9007199254740991" }).importMaxBytes).toBe(Number.MAX_SAFE_INTEGER);
    expect(refusal({ IMPORT_MAX_BYTES: "9007199254740993" }).problems).toEqual([
      'IMPORT_MAX_BYTES: must be between 1024 and 9007199254740991, got "9007199254740993"',
    ]);
    // The webhook worker claims concurrency × per receiver rows as one PostgreSQL integer.
    expect(refusal({ WEBHOOK_CONCURRENCY: "10001" }).problems).toEqual([
      'WEBHOOK_CONCURRENCY: must be between 1 and 10000, got "10001"',
    ]);
    // lru-cache allocates each tenant's slots up front.
    expect(refusal({ GRAPHQL_PERSISTED_MAX_PER_TENANT: "100001" }).problems).toEqual([
      'GRAPHQL_PERSISTED_MAX_PER_TENANT: must be between 0 and 100000, got "100001"',
    ]);
    expect(refusal({ FIELD_MAX_BYTES: "1073741824" }).problems).toEqual([
      'FIELD_MAX_BYTES: must be between 1 and 1073741823, got "1073741824"',
    ]);
    expect(refusal({ EVENTS_RETENTION_MS: "9007199254740991" }).problems).toEqual([
      'EVENTS_RETENTION_MS: must be between 0 and 3153600000000, got "9007199254740991"',
    ]);
    expect(loadConfig({ TRUST_PROXY: "255" }).trustProxy).toBe(255);
    expect(refusal({ TRUST_PROXY: "256" }).problems).toEqual([
      'TRUST_PROXY: the number of proxies in front must be between 0 and 255, got "256"',
    ]);
    // Those with a range of their own keep their message for any number past it.
    expect(refusal({ PORT: "99999999999999999999" }).problems).toEqual([
      "PORT: must be a port number (0-65535)",
    ]);
    expect(refusal({ SESSION_CACHE_MS: "99999999999999999999" }).problems).toEqual([
      "SESSION_CACHE_MS: must be at most 60000",
    ]);
  });
});

describe("JWT_PUBLIC_KEYS is read at loadConfig: a bad file stops start-up naming the variable", () => {
  it("a missing file, one that is not JSON and one that is not a JWKS", async () => {
    const { mkdtemp, writeFile } = await import("node:fs/promises");
    const dir = await mkdtemp(path.join(tmpdir(), "dimensio-jwks-"));
    const absent = path.join(dir, "absent.json");
    expect(refusal({ JWT_PUBLIC_KEYS: absent }).problems).toEqual([
      `JWT_PUBLIC_KEYS: cannot read a JWKS from ${absent} (no such file)`,
    ]);
    const garbage = path.join(dir, "garbage.json");
    await writeFile(garbage, "{nope");
    expect(refusal({ JWT_PUBLIC_KEYS: garbage }).problems).toEqual([
      expect.stringMatching(new RegExp(`^JWT_PUBLIC_KEYS: ${garbage} is not JSON: `)),
    ]);
    const notJwks = path.join(dir, "not-jwks.json");
    await writeFile(notJwks, JSON.stringify({ kty: "RSA" }));
    expect(refusal({ JWT_PUBLIC_KEYS: notJwks }).problems).toEqual([
      `JWT_PUBLIC_KEYS: ${notJwks} is not a JWKS ({"keys": [...]})`,
    ]);
    const notKeys = path.join(dir, "not-keys.json");
    await writeFile(notKeys, JSON.stringify({ keys: ["x"] }));
    expect(refusal({ JWT_PUBLIC_KEYS: notKeys }).problems[0]).toMatch(
      /^JWT_PUBLIC_KEYS: .* each of its "keys"/,
    );
    const empty = path.join(dir, "empty.json");
    await writeFile(empty, JSON.stringify({ keys: [] }));
    expect(loadConfig({ JWT_PUBLIC_KEYS: empty }).jwt.publicKeysPath).toBe(empty);
  });
});

describe("ROLE=relay and ROLE=webhooks need PostgreSQL and RabbitMQ", () => {
  it("are refused on the embedded database or the in-process bus, naming ROLE and what is missing", () => {
    expect(refusal({ ROLE: "relay" }).problems).toEqual([
      "ROLE: relay runs apart from the API and needs DATABASE_URL (the PostgreSQL it shares) and AMQP_URL (RabbitMQ; the in-process event bus reaches no other process); not set: DATABASE_URL, AMQP_URL",
    ]);
    expect(refusal({ ROLE: "webhooks", DATABASE_URL: "postgres://u@db/app" }).problems).toEqual([
      expect.stringMatching(/^ROLE: webhooks runs apart .*; not set: AMQP_URL$/),
    ]);
    expect(refusal({ ROLE: "relay", AMQP_URL: "amqp://mq" }).problems).toEqual([
      expect.stringMatching(/^ROLE: relay .*; not set: DATABASE_URL$/),
    ]);
  });

  it("start with both, and ROLE=all keeps the embedded defaults", () => {
    const env = { DATABASE_URL: "postgres://u@db/app", AMQP_URL: "amqp://mq" };
    expect(loadConfig({ ...env, ROLE: "relay" }).role).toBe("relay");
    expect(loadConfig({ ...env, ROLE: "webhooks" }).role).toBe("webhooks");
    expect(loadConfig({}).role).toBe("all");
    expect(loadConfig({ ROLE: "all" }).databaseUrl).toBeNull();
  });
});
