// What src/db/pg-internals.ts (DescribedOnceQuery, the data layer's one reach into pg's private
// internals) buys (issue 36 §1): the process CPU per prepared statement sent through it, against
// the same statement sent through pg's public API (a query config with its name and types), on
// pools of the same connections, alternating rounds so that a shared machine's load falls on both.
// The statement is shaped like a read of one record (12 columns), prepared by name as reads are.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/pg-internals.ts
import pg from "pg";
import { DescribedOnceQuery } from "../src/db/pg-internals.ts";

const url = process.env.TEST_DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/postgres";
const N = Number(process.env.BENCH_STATEMENTS ?? 4000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const CONCURRENCY = 4;
const SQL = `SELECT 5000 + $1::int AS "CUST_ID", 'Name ' || $1 AS "NAME", 'x'::text AS "A", 'y'::text AS "B",
  1.5::numeric AS "C", 2::int8 AS "D", now() AS "E", true AS "F", 'z'::text AS "G", 3::int AS "H",
  'w'::text AS "I", '{}'::jsonb AS "J"`;
const NAME = "bench_pg_internals";

type Send = (client: pg.PoolClient, values: unknown[]) => Promise<unknown>;
const viaInternals: Send = (client, values) =>
  new Promise((resolve, reject) => {
    const query = new DescribedOnceQuery({ text: SQL, values, types: pg.types, name: NAME });
    (client.query as unknown as (q: unknown, v: undefined, cb: (e: Error | null) => void) => void).call(
      client,
      query,
      undefined,
      (err) => (err ? reject(err) : resolve(undefined)),
    );
  });
const viaPublicApi: Send = (client, values) =>
  client.query({ text: SQL, values, types: pg.types, name: NAME });

async function round(pool: pg.Pool, send: Send): Promise<number> {
  const clients = await Promise.all(Array.from({ length: CONCURRENCY }, () => pool.connect()));
  const start = process.cpuUsage();
  let left = N;
  await Promise.all(
    clients.map(async (client) => {
      while (left-- > 0) await send(client, [left % 100]);
    }),
  );
  const used = process.cpuUsage(start);
  for (const client of clients) client.release();
  return (used.user + used.system) / N;
}

const pools = [0, 1].map(() => new pg.Pool({ connectionString: url, max: CONCURRENCY }));
const [internalsPool, publicPool] = pools as [pg.Pool, pg.Pool];
await round(internalsPool, viaInternals);
await round(publicPool, viaPublicApi);
const a: number[] = [];
const b: number[] = [];
for (let i = 0; i < ROUNDS; i++) {
  a.push(await round(internalsPool, viaInternals));
  b.push(await round(publicPool, viaPublicApi));
}
const show = (xs: number[]) => {
  const sorted = [...xs].sort((p, q) => p - q);
  return `least ${sorted[0]!.toFixed(1)}, median ${sorted[Math.floor(sorted.length / 2)]!.toFixed(1)} (${xs.map((x) => x.toFixed(0)).join(" ")})`;
};
console.log(`DescribedOnceQuery (pg-internals.ts): µs of process CPU per statement: ${show(a)}`);
console.log(`pg's public API (query config):       µs of process CPU per statement: ${show(b)}`);
await Promise.all(pools.map((p) => p.end()));
