// Write throughput on the real PostgreSQL: creates and patches through the whole pipeline (field
// rules, templates with a sequence, foreign keys, audit fields, outbox row), in process and over
// HTTP. Prints a Markdown table for docs/benchmarks.md.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/write-bench.ts
//
// BENCH_SECONDS (default 5) per scenario; BENCH_CONCURRENCY (default "1,8,32") workers.
import { performance } from "node:perf_hooks";
import { buildApp } from "../src/app.ts";
import { createOne } from "../src/resolvers/write/operations.ts";
import type { Services } from "../src/services.ts";
import type { RequestContext } from "../src/types.ts";
import { listenAndLogin, UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { createTestServices, TEST_DATABASE_URL } from "../test/helpers/env.ts";

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const CONCURRENCY = (process.env.BENCH_CONCURRENCY ?? "1,8,32").split(",").map(Number);

interface Outcome {
  scenario: string;
  concurrency: number;
  ok: number;
  failed: number;
  /** Records written (a batch request writes many). */
  records: number;
  seconds: number;
  latencies: number[];
}

/** Runs `op` from `concurrency` workers for SECONDS; op resolves to the records it wrote (0 = failed). */
async function run(
  scenario: string,
  concurrency: number,
  op: (worker: number) => Promise<number>,
): Promise<Outcome> {
  const outcome: Outcome = { scenario, concurrency, ok: 0, failed: 0, records: 0, seconds: 0, latencies: [] };
  const start = performance.now();
  const end = start + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, worker) => {
      while (performance.now() < end) {
        const t0 = performance.now();
        const written = await op(worker).catch(() => 0);
        outcome.latencies.push(performance.now() - t0);
        if (written > 0) {
          outcome.ok++;
          outcome.records += written;
        } else outcome.failed++;
      }
    }),
  );
  outcome.seconds = (performance.now() - start) / 1000;
  return outcome;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

function row(o: Outcome): string {
  const sorted = [...o.latencies].sort((a, b) => a - b);
  return `| ${o.scenario} | ${o.concurrency} | ${o.ok} | ${o.failed} | ${(o.records / o.seconds).toFixed(0)} | ${percentile(sorted, 50).toFixed(1)} | ${percentile(sorted, 99).toFixed(1)} |`;
}

async function outboxCount(services: Services): Promise<number> {
  const res = await services.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "TB_ANAG_OUTBOX00"`);
  return Number(res.rows[0]!.n);
}

function annaContext(): RequestContext {
  return {
    principal: {
      userId: "anna",
      tenantId: "acme",
      sessionId: "bench",
      peso: 1,
      centroDett: "HQ",
      ambiente: "production",
      lingua: "it",
      grants: [
        { COD_MENU: "erp", NLEFT: 1, NRIGHT: 22, OPERATIONS: ["read", "write", "force_delete"], LEVEL: 4 },
      ],
    },
    source: "anag-1",
    centerDett: null,
    requestId: "bench",
    now: () => new Date(),
  };
}

async function main() {
  if (!TEST_DATABASE_URL) {
    console.error(
      "Set TEST_DATABASE_URL to a PostgreSQL server (a scratch database is created and dropped).",
    );
    process.exit(2);
  }
  const services = await createTestServices("postgres", {
    fixture: "sample",
    env: UNLIMITED_ENV,
  });
  const app = await buildApp(services);
  try {
    const { base, token } = await listenAndLogin(app, "anna", "anna-secret-1");
    const headers = { "content-type": "application/json", authorization: `Bearer ${token}` };
    const send = async (method: string, path: string, body: unknown, expected: number) => {
      const res = await fetch(`${base}${path}`, { method, headers, body: JSON.stringify(body) });
      const json = (await res.json()) as { data?: { CUST_ID?: number }; success?: number };
      if (res.status !== expected) throw new Error(`${method} ${path}: ${res.status}`);
      return json;
    };

    const outcomes: Outcome[] = [];
    const outboxBefore = await outboxCount(services);
    let writes = 0;
    const ctx = annaContext();
    for (const c of CONCURRENCY) {
      outcomes.push(
        await run("create, in process (resolver)", c, async () => {
          await createOne(services, ctx, "CUST", { NAME: "Bench Srl", CITY_ID: "MI", VIP: true });
          return 1;
        }),
      );
      outcomes.push(
        await run("create, HTTP POST", c, async () => {
          await send(
            "POST",
            "/api/v4/core/CUST?source=anag-1",
            { data: { NAME: "Bench Srl", CITY_ID: "MI" } },
            201,
          );
          return 1;
        }),
      );
      outcomes.push(
        await run("create without a sequence (ADDR), HTTP POST", c, async () => {
          await send("POST", "/api/v4/core/ADDR?source=anag-2", { data: { CUST_ID: 1, KIND: "BENCH" } }, 201);
          return 1;
        }),
      );
      const own = await Promise.all(
        Array.from({ length: c }, async () =>
          Number(
            (await send("POST", "/api/v4/core/CUST?source=anag-1", { data: { NAME: "Own" } }, 201)).data
              ?.CUST_ID,
          ),
        ),
      );
      writes += c;
      let n = 0;
      outcomes.push(
        await run("patch, HTTP PATCH (one record per worker)", c, async (w) => {
          await send(
            "PATCH",
            `/api/v4/core/CUST/${own[w]}?source=anag-1`,
            { data: { NOTES: `n${n++}` } },
            200,
          );
          return 1;
        }),
      );
      outcomes.push(
        await run("patch, HTTP PATCH (all workers, one record)", c, async () => {
          await send(
            "PATCH",
            `/api/v4/core/CUST/${own[0]}?source=anag-1`,
            { data: { NOTES: `h${n++}` } },
            200,
          );
          return 1;
        }),
      );
      const batch = Array.from({ length: 100 }, (_, i) => ({ NAME: `Batch ${i}` }));
      outcomes.push(
        await run("create, HTTP POST /batch of 100 (records/s)", c, async () => {
          const res = await send("POST", "/api/v4/core/CUST/batch?source=anag-1", { data: batch }, 200);
          return Number(res.success);
        }),
      );
    }
    writes += outcomes.reduce((sum, o) => sum + o.records, 0);
    const events = (await outboxCount(services)) - outboxBefore;

    console.log(
      `Write throughput, PostgreSQL (${SECONDS} s per row), ${new Date().toISOString().slice(0, 10)}\n`,
    );
    console.log("| Scenario | Workers | Requests ok | Failed | Records/s | p50 ms | p99 ms |");
    console.log("|---|---|---|---|---|---|---|");
    for (const o of outcomes) console.log(row(o));
    console.log(
      `\nOutbox rows written: ${events} for ${writes} record writes (one per write: ${events === writes}).`,
    );
  } finally {
    await app.close();
    await services.close();
  }
}

await main();
