// Bench data: `count` customers of the sample fixture's tenant acme (or another) in TB_ANAG_CUST00, spread over
// the given cities, each with a unique CODE (NOT NULL), and the table analysed; orders of them; and
// the scratch database (openBenchServices) and app (openBenchApp) a bench runs on.
import path from "node:path";
import type { Services } from "../src/services.ts";
import type { Queryable } from "../src/types.ts";
import { UNLIMITED_ENV } from "../test/helpers/auth.ts";
import {
  createTestApp,
  createTestServices,
  TEST_DATABASE_URL,
  TEST_JWT_SECRET,
  type TestApp,
} from "../test/helpers/env.ts";

export async function seedCustomers(
  db: Queryable,
  count: number,
  cities: readonly string[] = ["MI", "RM", "TO"],
  tenantId = "acme",
): Promise<void> {
  await db.query(
    `INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "CITY_ID", "EMAIL", "CREDIT_LIMIT", "VIP", "TREC", "CDATA", "OWNER", "TENANT_ID")
     SELECT 'Bench customer ' || g, 'B-' || lpad(g::text, 7, '0'), ($2::text[])[1 + g % cardinality($2::text[])],
            'c' || g || '@bench.example', (g % 1000) * 100.5, g % 2 = 0, 'N', '20260101000000', 'bench', $3
       FROM generate_series(1, $1::int) AS g`,
    [count, cities, tenantId],
  );
  await db.query(`ANALYZE "TB_ANAG_CUST00"`);
}

/** `count` orders of a tenant (acme), each of one of the first (at most 1,000) customers, analysed. */
export async function seedOrders(
  db: Queryable,
  count: number,
  customers: number,
  tenantId = "acme",
): Promise<void> {
  await db.query(
    `INSERT INTO "TB_DOC_ORD00" ("ORD_NO", "CUST_ID", "ORD_DATE", "STATUS", "TOTAL", "TREC", "CDATA", "OWNER", "TENANT_ID")
     SELECT 'O-' || g, c."CUST_ID", '20260101', 'N', g % 1000, 'N', '20260101000000', 'bench', $3
       FROM generate_series(1, $1::int) AS g
       JOIN LATERAL (SELECT "CUST_ID" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = $3 ORDER BY "CUST_ID" OFFSET (g % $2::int) LIMIT 1) c ON true`,
    [count, Math.min(customers, 1000), tenantId],
  );
  await db.query(`ANALYZE "TB_DOC_ORD00"`);
}

/** The paths of bench/compare's REST workloads, for every bench that drives them. */
export const BENCH_PATHS = {
  /** W1: 20 customers of a city, sorted by name (with the total). */
  list: "/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&sort=NAME&$num_rows=20",
  /** W2: one customer by id. */
  byId: (id: number | string) => `/api/v4/core/CUST/${id}?source=anag-1`,
  /** W3: the 20 newest orders with their customer, no total. */
  orders: "/api/v4/core/ORD?source=sales-1&sort=-ORD_ID&$num_rows=20&$expand=CUST&$count=none",
  /** W4: a create of a customer (its body: { data: { NAME, CODE } }). */
  create: "/api/v4/core/CUST?source=anag-1",
  /** W5: the count of a city's customers. */
  count: "/api/v4/core/CUST/count?source=anag-1&filter[CITY_ID]=MI",
} as const;

/**
 * W4's customer, its code given: the `data` of a create at BENCH_PATHS.create. Its NAME is how
 * bench/compare finds the creates' rows to delete them after the create workloads.
 */
export const BENCH_CREATE = { NAME: "Bench create", CODE: "B-00001" } as const;

/**
 * Deletes the customers the creates made (BENCH_CREATE.NAME) and vacuums their table: they sort
 * before the seeded "Bench customer …" with no city, so W1's scan in NAME order would otherwise
 * step over every one of them (docs/benchmarks.md, "W1: the incremental sort, and a bench artefact").
 */
export async function forgetBenchCreates(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "NAME" = $1`, [
    BENCH_CREATE.NAME,
  ]);
  await db.query(`VACUUM ANALYZE "TB_ANAG_CUST00"`);
}

/**
 * Waits until the outbox holds no unpublished row (a create measurement with the event side in
 * the process ends there); throws after `timeoutMs`, a relay that publishes nothing being a bench
 * that measures nothing.
 */
export async function allEventsPublished(db: Queryable, timeoutMs = 120_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; ; ) {
    // A count of the backlog: the outbox's partial index holds the unpublished rows only.
    if ((await unpublishedEvents(db)) === 0) return;
    if (Date.now() > deadline)
      throw new Error(`the events were not all published within ${timeoutMs / 1000} s`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** Outbox rows not yet published (the relay's backlog). */
export async function unpublishedEvents(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00" WHERE "PUBLISHED_AT" IS NULL`,
  );
  return rows[0]?.n ?? 0;
}

/** W4 as a GraphQL mutation. */
export const BENCH_CREATE_MUTATION = `mutation { CUST_create(source: "anag-1", data: {NAME: "${BENCH_CREATE.NAME}", CODE: "${BENCH_CREATE.CODE}"}) { data { CUST_ID } } }`;

/**
 * The services of a bench: a scratch PostgreSQL database (dropped on close) with the sample
 * fixture and no rate limits. Without TEST_DATABASE_URL the bench stops with how to run it.
 */
export async function openBenchServices(env: Record<string, string> = {}): Promise<Services> {
  requireBenchDatabase();
  const services = await createTestServices("postgres", {
    fixture: "sample",
    env: { ...UNLIMITED_ENV, ...env },
  });
  if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
  return services;
}

/** Without TEST_DATABASE_URL a bench stops with how to run it. */
export function requireBenchDatabase(): void {
  if (TEST_DATABASE_URL) return;
  console.error(
    "Set TEST_DATABASE_URL to a PostgreSQL server (a scratch database is created and dropped), e.g.\n" +
      `  TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx ${path.relative(process.cwd(), process.argv[1] ?? "bench/compare.ts")}`,
  );
  process.exit(2);
}

/**
 * The environment of the service a bench starts as its own process (`npm start`'s command): on
 * `databaseUrl`, listening on `port`, no rate limits, no demo data, warnings only.
 */
export function benchServiceEnv(databaseUrl: string, port: number, dataDir: string): Record<string, string> {
  return {
    ...UNLIMITED_ENV,
    DATABASE_URL: databaseUrl,
    JWT_SECRET: TEST_JWT_SECRET,
    DEMO_DATA: "false",
    LOG_LEVEL: "warn",
    PORT: String(port),
    DATA_DIR: dataDir,
  };
}

export type BenchApp = TestApp;

/**
 * The test app of a bench (createTestApp on a scratch PostgreSQL database with the sample fixture
 * and no rate limits) with `customers` customers (and `orders` orders of them) seeded; close()
 * closes the app, then drops the database.
 */
export async function openBenchApp(opts: {
  customers: number;
  orders?: number;
  env?: Record<string, string>;
}): Promise<BenchApp> {
  requireBenchDatabase();
  const bench = await createTestApp("postgres", {
    fixture: "sample",
    env: { ...UNLIMITED_ENV, ...opts.env },
  });
  try {
    await seedCustomers(bench.services.db, opts.customers);
    if (opts.orders) await seedOrders(bench.services.db, opts.orders, opts.customers);
  } catch (err) {
    await bench.close();
    throw err;
  }
  return bench;
}

/** BENCH_ENV (K=V,K=V): settings of the Dimensio under test, e.g. EVENTS_GATHER_MS=50,LOG_LEVEL=info. */
export function benchEnv(): Record<string, string> {
  return Object.fromEntries(
    (process.env.BENCH_ENV ?? "")
      .split(",")
      .filter((kv) => kv.includes("="))
      .map((kv) => [kv.slice(0, kv.indexOf("=")), kv.slice(kv.indexOf("=") + 1)]),
  );
}
