// Export and import figures (issue 39 §2, decisions §20), on a scratch PostgreSQL database with the
// service as `npm start` runs it:
// - export of BENCH_EXPORT_ROWS customers (1,000,000; seeded with INSERT … SELECT generate_series)
//   as CSV by a client reading as fast as it can: time, rows/s and the service's RSS growth (RSS
//   sampled every 100 ms during the export, against RSS before it);
// - the same export read at BENCH_SLOW_KBPS (100 KB/s) for BENCH_SLOW_SECONDS: RSS stays flat
//   while the client holds one connection;
// - import of BENCH_IMPORT_ROWS rows (100,000) as one CSV body, against the same rows sent as
//   batch creates (POST /CUST/batch, MAX_BATCH_SIZE rows each, one request after another): rows/s
//   and their ratio, BENCH_ROUNDS times (1). BENCH_EXPORT_ROWS=0 skips the export, BENCH_IMPORT_ROWS=0 the import.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/export-import.ts
import http from "node:http";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { loginOverHttp } from "../test/helpers/auth.ts";
import { freePort, spawnStart, waitReady } from "../test/helpers/process.ts";
import { benchServiceEnv, openBenchServices, seedCustomers } from "./seed.ts";

const EXPORT_ROWS = Number(process.env.BENCH_EXPORT_ROWS ?? 1_000_000);
const IMPORT_ROWS = Number(process.env.BENCH_IMPORT_ROWS ?? 100_000);
const SLOW_KBPS = Number(process.env.BENCH_SLOW_KBPS ?? 100);
const SLOW_SECONDS = Number(process.env.BENCH_SLOW_SECONDS ?? 15);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 1);
const BATCH = 500;

const rssMb = (pid: number) =>
  Number(
    readFileSync(`/proc/${pid}/status`, "utf8")
      .split("\n")
      .find((l) => l.startsWith("VmRSS:"))
      ?.split(/\s+/)[1] ?? 0,
  ) / 1024;

/** Samples `pid`'s RSS every 100 ms until stopped: the highest seen. */
function sampler(pid: number) {
  let peak = rssMb(pid);
  const timer = setInterval(() => {
    peak = Math.max(peak, rssMb(pid));
  }, 100);
  return {
    stop() {
      clearInterval(timer);
      return Math.max(peak, rssMb(pid));
    },
  };
}

/** GET `url` reading every byte as it comes: bytes and lines. */
function readAll(url: string, headers: Record<string, string>): Promise<{ bytes: number; lines: number }> {
  return new Promise((resolve, reject) => {
    http
      .get(url, { headers }, (res) => {
        if (res.statusCode !== 200) reject(new Error(`export answered ${res.statusCode}`));
        let bytes = 0;
        let lines = 0;
        res.on("data", (chunk: Buffer) => {
          bytes += chunk.length;
          for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) lines++;
        });
        res.on("end", () => resolve({ bytes, lines }));
        res.on("error", reject);
      })
      .on("error", reject);
  });
}

/** GET `url` taking `kbps` KB a second for `seconds`, then hanging up: RSS samples (MB) by second. */
function readSlowly(
  url: string,
  headers: Record<string, string>,
  pid: number,
  kbps: number,
  seconds: number,
): Promise<{ bytes: number; rss: number[] }> {
  return new Promise((resolve, reject) => {
    const rss: number[] = [];
    const request = http.get(url, { headers }, (res) => {
      let bytes = 0;
      let allowance = 0;
      res.pause();
      const tick = setInterval(() => {
        rss.push(rssMb(pid));
        if (rss.length > seconds) {
          clearInterval(tick);
          request.destroy();
          resolve({ bytes, rss });
          return;
        }
        allowance += kbps * 1024;
        // Read what this second allows, then stop reading until the next.
        while (allowance > 0) {
          const chunk = res.read(Math.min(allowance, 16 * 1024)) as Buffer | null;
          if (!chunk) break;
          bytes += chunk.length;
          allowance -= chunk.length;
        }
      }, 1000);
      res.on("error", () => {});
    });
    request.on("error", (err) => {
      if (rss.length <= seconds) reject(err);
    });
  });
}

function customerRows(n: number, tag: string) {
  return Array.from({ length: n }, (_, i) => ({
    NAME: `${tag} customer ${i}`,
    CITY_ID: ["MI", "RM", "TO"][i % 3]!,
    EMAIL: `${tag}${i}@bench.example`,
    CREDIT_LIMIT: (i % 1000) * 10.5,
    VIP: i % 2 === 0,
  }));
}

async function main() {
  const services = await openBenchServices();
  if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
  const dir = mkdtempSync(path.join(tmpdir(), "dimensio-transfer-"));
  let child: ReturnType<typeof spawnStart> | null = null;
  try {
    const t0 = performance.now();
    await seedCustomers(services.db, EXPORT_ROWS);
    console.log(`seeded ${EXPORT_ROWS} customers in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    const port = await freePort();
    // An import body is read at the pace its rows are written: a long one needs a long request time.
    child = spawnStart({
      ...benchServiceEnv(services.db.connectionString, port, dir),
      REQUEST_TIMEOUT_MS: "290000",
    });
    const base = `http://127.0.0.1:${port}`;
    await waitReady(base, child);
    const pid = child.child.pid!;
    const token = await loginOverHttp(base, "anna", "anna-secret-1");
    const auth = { authorization: `Bearer ${token}` };
    if (EXPORT_ROWS > 0) await exports(base, auth, pid);
    if (IMPORT_ROWS > 0) await imports(base, auth);
  } finally {
    child?.child.kill("SIGTERM");
    await child?.exited;
    rmSync(dir, { recursive: true, force: true });
    await services.close();
  }
}

async function exports(base: string, auth: Record<string, string>, pid: number) {
  const exportUrl = `${base}/api/v4/core/CUST/export?source=anag-1&format=csv`;
  {
    // ---- export, read as fast as the client can
    const before = rssMb(pid);
    const peak = sampler(pid);
    const t0 = performance.now();
    const all = await readAll(exportUrl, auth);
    const seconds = (performance.now() - t0) / 1000;
    const top = peak.stop();
    console.log(
      `export CSV: ${all.lines - 1} rows, ${(all.bytes / 1024 / 1024).toFixed(0)} MB in ${seconds.toFixed(1)} s ` +
        `(${Math.round((all.lines - 1) / seconds)} rows/s); RSS before ${before.toFixed(0)} MB, peak ${top.toFixed(0)} MB: +${(top - before).toFixed(0)} MB`,
    );

    // ---- export, read at SLOW_KBPS
    const slow = await readSlowly(exportUrl, auth, pid, SLOW_KBPS, SLOW_SECONDS);
    console.log(
      `slow reader (${SLOW_KBPS} KB/s, ${SLOW_SECONDS} s): ${(slow.bytes / 1024).toFixed(0)} KB read; RSS by second (MB): ${slow.rss.map((r) => r.toFixed(0)).join(" ")}`,
    );
  }
}

/** The same rows as one import and as batch creates, BENCH_ROUNDS times (1). */
async function imports(base: string, auth: Record<string, string>) {
  for (let round = 1; round <= ROUNDS; round++) {
    // ---- import vs batch creates
    let t0 = performance.now();
    const rows = customerRows(IMPORT_ROWS, `Imported ${round}`);
    const csv = `NAME,CITY_ID,EMAIL,CREDIT_LIMIT,VIP\n${rows
      .map((r) => `${r.NAME},${r.CITY_ID},${r.EMAIL},${r.CREDIT_LIMIT},${r.VIP}`)
      .join("\n")}\n`;
    t0 = performance.now();
    const imported = await fetch(`${base}/api/v4/core/CUST/import?source=anag-1`, {
      method: "POST",
      headers: { ...auth, "content-type": "text/csv" },
      body: csv,
    });
    const importSeconds = (performance.now() - t0) / 1000;
    const result = (await imported.json()) as { data?: { created: number; failed: number } };
    if (imported.status !== 200 || result.data?.created !== IMPORT_ROWS)
      throw new Error(`import answered ${imported.status}: ${JSON.stringify(result).slice(0, 500)}`);
    const importRate = IMPORT_ROWS / importSeconds;
    console.log(
      `round ${round}: import CSV: ${IMPORT_ROWS} rows in ${importSeconds.toFixed(1)} s (${Math.round(importRate)} rows/s)`,
    );

    const batches = customerRows(IMPORT_ROWS, `Batched ${round}`);
    t0 = performance.now();
    for (let i = 0; i < batches.length; i += BATCH) {
      const res = await fetch(`${base}/api/v4/core/CUST/batch?source=anag-1`, {
        method: "POST",
        headers: { ...auth, "content-type": "application/json" },
        body: JSON.stringify({ data: batches.slice(i, i + BATCH) }),
      });
      const body = (await res.json()) as { failed?: number };
      if (res.status !== 200 || body.failed !== 0)
        throw new Error(`batch answered ${res.status}: ${JSON.stringify(body).slice(0, 300)}`);
    }
    const batchSeconds = (performance.now() - t0) / 1000;
    const batchRate = IMPORT_ROWS / batchSeconds;
    console.log(
      `round ${round}: batch creates: ${IMPORT_ROWS} rows in ${batchSeconds.toFixed(1)} s (${Math.round(batchRate)} rows/s); import / batch = ${(importRate / batchRate).toFixed(2)}`,
    );
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
