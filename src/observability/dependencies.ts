// Each dependency's state, as its component exposes it, for GET /healthz's detail and the
// `dimensio_dependency_up{dependency}` gauge of GET /metrics (docs/faults.md). Reading a state is
// cheap: the database's is the readiness probe's (bounded, shared by concurrent callers), the
// others' are what their clients already know (no request of their own).
import type { S3Client } from "@aws-sdk/client-s3";
import type { Redis } from "ioredis";
import { Gauge, type Registry } from "prom-client";
import type { ReadinessChecks } from "../db/readiness.ts";
import type { DependencyState } from "../types.ts";

export type DependencyProbe = () => DependencyState | Promise<DependencyState>;

export interface DependencyHealth {
  /** Every dependency of the process by name (database, database_read, broker, redis, media). */
  states(): Promise<Record<string, DependencyState>>;
}

/**
 * The states of `probes`; with a registry, the gauge too: 1 while a dependency is up (or
 * embedded), 0 while it is down, no sample while it is idle or unknown.
 */
export function createDependencyHealth(
  probes: Record<string, DependencyProbe>,
  registry?: Registry,
): DependencyHealth {
  const states = async () => {
    const entries = await Promise.all(
      Object.entries(probes).map(async ([name, probe]) => {
        try {
          return [name, await probe()] as const;
        } catch {
          return [name, "down" as const] as const;
        }
      }),
    );
    return Object.fromEntries(entries);
  };
  if (registry) {
    // One gauge per registry: an app built again over the same services replaces it.
    registry.removeSingleMetric("dimensio_dependency_up");
    new Gauge({
      name: "dimensio_dependency_up",
      help: "1 while a dependency (database, database_read, broker, redis, media) is reachable, 0 while it is not.",
      labelNames: ["dependency"],
      registers: [registry],
      async collect() {
        this.reset();
        for (const [dependency, state] of Object.entries(await states())) {
          if (state === "up" || state === "embedded") this.set({ dependency }, 1);
          else if (state === "down") this.set({ dependency }, 0);
        }
      },
    });
  }
  return { states };
}

/** How long a command Redis did not answer keeps it shown down (a silent server stays "ready"). */
export const REDIS_SILENCE_MS = 10_000;

/**
 * The rate limits' Redis: ioredis's own status, and down too while a command it did not answer is
 * recent (`lastFallbackAt`: a connection can stay open to a server that has gone silent).
 * `embedded` without REDIS_URL: counters in memory.
 */
export function redisState(
  redis: Pick<Redis, "status"> | null,
  lastFallbackAt: () => number = () => 0,
): DependencyState {
  if (redis === null) return "embedded";
  if (redis.status !== "ready") return "down";
  return Date.now() - lastFallbackAt() < REDIS_SILENCE_MS ? "down" : "up";
}

/** How long /healthz waits for the database's answer before it shows the last one it had. */
export const HEALTH_WAIT_MS = 250;

/**
 * The database's state from a readiness check (src/db/readiness.ts, itself bounded). A liveness
 * probe must answer at once whatever the database does: past `waitMs`, the state is the last
 * check's (`unknown` before the first), and the check still running updates it when it ends.
 */
export function databaseProbe(
  readiness: () => Promise<ReadinessChecks>,
  waitMs = HEALTH_WAIT_MS,
): DependencyProbe {
  let last: DependencyState = "unknown";
  return async () => {
    const checking = readiness().then(
      (checks) => {
        last = checks.database === "ok" ? "up" : "down";
        return last;
      },
      () => {
        last = "down";
        return last;
      },
    );
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<DependencyState>((resolve) => {
      timer = setTimeout(() => resolve(last), waitMs);
      timer.unref();
    });
    return Promise.race([checking, late]).finally(() => clearTimeout(timer));
  };
}

/**
 * An S3 client's state from the outcome of its latest request: down after one that could not reach
 * the server (or got a 5xx), up after any answer of the server (a 404 too). It makes no request of
 * its own, so it reads `unknown` until media is first used.
 */
export function observeS3(client: S3Client): () => DependencyState {
  let state: DependencyState = "unknown";
  client.middlewareStack.add(
    (next) => async (args) => {
      try {
        const out = await next(args);
        state = "up";
        return out;
      } catch (err) {
        const status = (err as { $metadata?: { httpStatusCode?: number } }).$metadata?.httpStatusCode;
        state = status !== undefined && status < 500 ? "up" : "down";
        throw err;
      }
    },
    { step: "deserialize", name: "dimensioDependencyState" },
  );
  return () => state;
}
