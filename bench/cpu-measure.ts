// Process CPU per request (issue 19), the way bench/rest-cpu.ts and bench/graphql-cpu.ts measure
// it: requests go through app.inject (no sockets, no load generator), a fixed number of them a few
// at a time, and the process's CPU time (user + system) is divided by their count. On a shared
// machine this moves far less than req/s. Each round measures every workload once; the least of
// the rounds is printed last, because what other processes add to a round only adds.
import { constants, PerformanceObserver } from "node:perf_hooks";
import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from "fastify";

/** What both CPU benches read of the environment (their headers list the variables). */
export function cpuBenchSettings() {
  const env = process.env;
  return {
    customers: Number(env.BENCH_CUSTOMERS ?? 20_000),
    orders: Number(env.BENCH_ORDERS ?? 20_000),
    requests: Number(env.BENCH_REQUESTS ?? 4000),
    concurrency: Number(env.BENCH_CONCURRENCY ?? 16),
    rounds: Number(env.BENCH_ROUNDS ?? 3),
    /** BENCH_WORKLOADS=W2,W4: only those (null: all). */
    only: env.BENCH_WORKLOADS?.split(",") ?? null,
  };
}

/**
 * `n` requests through app.inject, `concurrency` at a time; throws at the first answer `ok`
 * refuses (a bench of failing requests measures nothing).
 */
export function injectConcurrently(
  app: FastifyInstance,
  concurrency: number,
  ok: (res: LightMyRequestResponse) => boolean = (res) => res.statusCode === 200,
) {
  return async (request: InjectOptions, n: number): Promise<void> => {
    let next = 0;
    const worker = async () => {
      while (next++ < n) {
        const res = await app.inject(request);
        if (!ok(res)) throw new Error(`${request.url}: ${res.statusCode} ${res.body}`);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
  };
}

export interface CpuWorkload {
  name: string;
  /** How many requests one measurement sends. */
  requests: number;
  /** Sends that many. */
  send(requests: number): Promise<void>;
  /** Run after each measurement, outside it (a create workload forgets its rows). */
  after?(): Promise<void>;
}

/**
 * Something measured next to the CPU: called (and awaited) before a workload's requests, it
 * returns what is called after them (once the CPU time is taken) for the text to add to the
 * workload's figure.
 */
export type AlsoMeasure = (
  name: string,
  requests: number,
) => (() => Promise<string>) | Promise<() => Promise<string>>;

/** Prints each round's CPU per request of every workload, then the least of the rounds. */
export async function printCpuPerRequest(
  workloads: readonly CpuWorkload[],
  rounds: number,
  also?: AlsoMeasure,
): Promise<void> {
  const least = new Map<string, number>();
  for (let round = 1; round <= rounds; round++) {
    const line: string[] = [];
    for (const { name, requests, send, after } of workloads) {
      const finish = await also?.(name, requests);
      const before = process.cpuUsage();
      await send(requests);
      const used = process.cpuUsage(before);
      const perRequest = (used.user + used.system) / requests;
      least.set(name, Math.min(least.get(name) ?? Number.POSITIVE_INFINITY, perRequest));
      const extra = finish ? `, ${await finish()}` : "";
      const system = Math.round((used.system / (used.user + used.system)) * 100);
      line.push(`${name} ${perRequest.toFixed(0)} µs/req (${system} % system)${extra}`);
      await after?.();
    }
    console.log(`round ${round}: ${line.join("; ")}`);
  }
  console.log(`least: ${[...least].map(([name, us]) => `${name} ${us.toFixed(0)} µs/req`).join("; ")}`);
}

/**
 * The garbage collector's time per request, by kind (V8's minor and major collections), from
 * Node's performance timeline: an AlsoMeasure for printCpuPerRequest.
 */
export function gcPerRequest(): AlsoMeasure {
  return (_name, requests) => {
    const by = { minor: 0, major: 0 };
    const observer = new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) {
        const kind = (entry as unknown as { detail?: { kind?: number } }).detail?.kind;
        if (kind === constants.NODE_PERFORMANCE_GC_MINOR) by.minor += entry.duration;
        else by.major += entry.duration;
      }
    });
    observer.observe({ entryTypes: ["gc"] });
    return async () => {
      // The entries of the last collections are queued: one turn for them to arrive.
      await new Promise((resolve) => setImmediate(resolve));
      observer.disconnect();
      const us = (ms: number) => Math.round((ms * 1000) / requests);
      return `GC ${us(by.minor)} µs minor + ${us(by.major)} µs other`;
    };
  };
}
