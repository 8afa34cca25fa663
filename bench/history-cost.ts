// What record history costs a create (issue 39 §1): W4's create of a customer (its code given)
// through the write resolver in process (no HTTP), CONCURRENCY at a time (the group commit
// applies, as under W4's 16 connections), with CUST's TB_DIM.HISTORY on and off in alternating
// blocks (which state comes first swaps every block), so that a noisy machine's drift falls on
// both alike. Per block and state: creates per second, this process's CPU per create, and the WAL
// bytes per create (which do not depend on the machine's load). Prints the medians of the blocks'
// on / off ratios.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/history-cost.ts
//
// BLOCKS (default 12), CREATES per block and state (default 400), CONCURRENCY (default 16).
import { writeMetadata } from "../src/resolvers/metadata/write.ts";
import { createOne } from "../src/resolvers/write/operations.ts";
import { contextFor } from "../test/write/helpers.ts";
import { BENCH_CREATE, openBenchServices, seedCustomers } from "./seed.ts";

const BLOCKS = Number(process.env.BLOCKS ?? 12);
const CREATES = Number(process.env.CREATES ?? 400);
const CONCURRENCY = Number(process.env.CONCURRENCY ?? 16);

interface Sample {
  perSecond: number;
  cpuUs: number;
  walBytes: number;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main() {
  const services = await openBenchServices();
  try {
    await seedCustomers(services.db, 20_000);
    const ctx = contextFor("anna", "anag-1");
    // anna of the sample fixture holds the metadata grant on erp (test/write/helpers.ts's does not).
    const base = contextFor("anna", "erp");
    const admin = {
      ...base,
      principal: {
        ...base.principal,
        grants: base.principal.grants.map((g) =>
          g.COD_MENU === "erp" ? { ...g, OPERATIONS: [...g.OPERATIONS, "metadata" as const] } : g,
        ),
      },
    };
    const setHistory = (on: boolean) =>
      writeMetadata(services, admin, {
        code: "DIM",
        op: "patch",
        key: { COD_DIM: "CUST" },
        data: { HISTORY: on },
      });
    const lsn = async () =>
      (await services.db.query<{ l: string }>("SELECT pg_current_wal_lsn()::text AS l")).rows[0]!.l;
    const walSince = async (from: string) =>
      Number(
        (
          await services.db.query<{ d: string }>(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1)::text AS d",
            [from],
          )
        ).rows[0]!.d,
      );
    const creates = async (n: number) => {
      let next = 0;
      const worker = async () => {
        while (next++ < n) await createOne(services, ctx, "CUST", { ...BENCH_CREATE });
      };
      await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    };
    const measure = async (on: boolean): Promise<Sample> => {
      await setHistory(on);
      await creates(50); // the new metadata version's statements prepared
      const wal0 = await lsn();
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await creates(CREATES);
      const ms = performance.now() - t0;
      const cpu = process.cpuUsage(cpu0);
      const walBytes = (await walSince(wal0)) / CREATES;
      return { perSecond: (CREATES / ms) * 1000, cpuUs: (cpu.user + cpu.system) / CREATES, walBytes };
    };
    const ratios: Array<{ speed: number; cpu: number; wal: number }> = [];
    const all: Record<"on" | "off", Sample[]> = { on: [], off: [] };
    for (let b = 0; b < BLOCKS; b++) {
      const block: Partial<Record<"on" | "off", Sample>> = {};
      for (const on of b % 2 ? [true, false] : [false, true]) {
        const s = await measure(on);
        block[on ? "on" : "off"] = s;
        all[on ? "on" : "off"].push(s);
        console.error(
          `  block ${b + 1} history ${on ? "on " : "off"}: ${s.perSecond.toFixed(0)} creates/s, ${s.cpuUs.toFixed(0)} µs CPU, ${s.walBytes.toFixed(0)} WAL bytes per create`,
        );
      }
      const { on, off } = block as Record<"on" | "off", Sample>;
      ratios.push({
        speed: on.perSecond / off.perSecond,
        cpu: on.cpuUs / off.cpuUs,
        wal: on.walBytes / off.walBytes,
      });
    }
    const m = (k: "on" | "off", f: (s: Sample) => number) => median(all[k].map(f));
    console.log(
      `\nW4's create in process, ${CONCURRENCY} at a time, ${CREATES} per block and state, ${BLOCKS} blocks; Node ${process.version}\n`,
    );
    console.log("| | history off | history on | on / off (median of blocks' ratios) |");
    console.log("|---|---:|---:|---:|");
    console.log(
      `| creates per second | ${m("off", (s) => s.perSecond).toFixed(0)} | ${m("on", (s) => s.perSecond).toFixed(0)} | ${median(ratios.map((r) => r.speed)).toFixed(3)} |`,
    );
    console.log(
      `| process CPU µs per create | ${m("off", (s) => s.cpuUs).toFixed(0)} | ${m("on", (s) => s.cpuUs).toFixed(0)} | ${median(ratios.map((r) => r.cpu)).toFixed(3)} |`,
    );
    console.log(
      `| WAL bytes per create | ${m("off", (s) => s.walBytes).toFixed(0)} | ${m("on", (s) => s.walBytes).toFixed(0)} | ${median(ratios.map((r) => r.wal)).toFixed(3)} |`,
    );
    console.log(`\nblocks' creates/s ratios: ${ratios.map((r) => r.speed.toFixed(2)).join(", ")}`);
  } finally {
    await services.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
