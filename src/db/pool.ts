// The service's one pg.Pool per connection string (PostgreSQL): its options, its connections
// (src/db/connection.ts), a gate that refuses connections while the watchdog holds the database
// down, and statements sent on their own. Prisma's driver adapter runs on this same pool.
import pg from "pg";
import { answeredByServer } from "./errors.ts";
import { type ConnectionHooks, type ServiceClient, serviceClientClass } from "./connection.ts";
import { DEFAULT_CONNECT_TIMEOUT_MS } from "./handle.ts";

/** How long past the statement timeout pg waits for an answer before it gives the connection up. */
const QUERY_TIMEOUT_GRACE_MS = 5000;

export interface PoolSettings {
  max: number;
  statementTimeoutMs: number;
  connectTimeoutMs?: number | undefined;
  /** `transaction`: behind PgBouncer's transaction pooling: no startup settings (below). */
  poolMode: "session" | "transaction";
  /** Throws while no connection may be handed out (the watchdog's check). */
  gate?: (() => void) | undefined;
  hooks: Omit<ConnectionHooks, "planModes">;
}

/**
 * A pg.Pool whose `connect` first asks the gate: while the watchdog holds the database down, a
 * request (Prisma's too) is refused at once instead of waiting for a connection that cannot come.
 */
class ServicePool extends pg.Pool {
  constructor(
    config: pg.PoolConfig,
    private readonly gate: () => void,
  ) {
    super(config);
  }

  // biome-ignore lint/suspicious/noExplicitAny: pg-pool's callback and promise forms
  override connect(callback?: any): any {
    try {
      this.gate();
    } catch (err) {
      if (typeof callback !== "function") return Promise.reject(err);
      process.nextTick(callback, err);
      return undefined;
    }
    return super.connect(callback);
  }
}

export function createPool(connectionString: string, settings: PoolSettings): pg.Pool {
  const session = settings.poolMode === "session";
  const config: pg.PoolConfig & { pipeline: boolean } = {
    connectionString,
    max: settings.max,
    application_name: "dimensio",
    // Statements are sent without waiting for the previous one's answer (pg 8.23): a transaction's
    // BEGIN travels with its first statement, and its last deferred statement with COMMIT.
    pipeline: true,
    // A database that is away fails a request within this (503), instead of leaving it waiting.
    connectionTimeoutMillis: settings.connectTimeoutMs ?? DEFAULT_CONNECT_TIMEOUT_MS,
    // A peer gone without a word (a cut network) is noticed by TCP keepalive, not only on next use.
    keepAlive: true,
    keepAliveInitialDelayMillis: 10_000,
    // The server cancels a statement at statement_timeout (504); one whose answer does not come
    // even QUERY_TIMEOUT_GRACE_MS later travels a dead network: pg then destroys the connection
    // (pipeline mode), the statement fails as DATABASE_UNAVAILABLE instead of hanging.
    query_timeout: settings.statementTimeoutMs + QUERY_TIMEOUT_GRACE_MS,
    Client: serviceClientClass({ ...settings.hooks, planModes: session }),
  };
  if (session) {
    // Startup parameters: PgBouncer refuses both (it knows only a few), so behind it in
    // transaction pooling mode the deployment sets the timeout (docs/decisions.md, issue 36).
    config.statement_timeout = settings.statementTimeoutMs;
    // Prepared statements keep their parse, never a generic plan: tenants differ too much in size
    // for one plan to fit all (a generic count of one city's customers chose a sequential scan,
    // twice the time of the custom plan; docs/benchmarks.md).
    config.options = "-c plan_cache_mode=force_custom_plan";
  }
  return new ServicePool(config, settings.gate ?? (() => {}));
}

/** An error the server answered a statement with, the session going on (not FATAL, not PANIC). */
function refusedOnly(err: unknown): boolean {
  return answeredByServer(err) && (err as { severity?: unknown }).severity === "ERROR";
}

/**
 * Sends a statement (`send` calls pg's `client.query` with the callback it is given) on a
 * connection of the pool and gives it back. pg-pool's own `query()` gives its connection back with
 * the statement's error, which closes it: every statement sent on its own that the server refused
 * (a value it rejects, a key already taken, a statement timeout) would cost the next statement a
 * new backend. A refusal (severity ERROR, with its SQLSTATE) leaves the session as it was (pg
 * forgets a named statement whose Parse failed, and keeps one whose execution failed, as the
 * server does), so the connection goes back; it is closed after any other error
 * (test/db/refusals-keep-connections.test.ts). Callbacks, not promises, below: this is every read's
 * path (test/query/statements-per-request.test.ts bounds the promises a request makes).
 */
export function onItsOwn<R>(
  pool: pg.Pool,
  send: (client: ServiceClient, done: (err: Error | null, res?: R) => void) => void,
): Promise<R> {
  return new Promise<R>((resolve, reject) => {
    pool.connect((err, c) => {
      if (err || !c) return reject(err);
      const client = c as unknown as ServiceClient & pg.PoolClient;
      // A checked-out connection has no listener of the pool's: one lost under the statement is
      // told here (not as an unhandled 'error' event); the statement fails on its own.
      let lost: Error | null = null;
      const onLost = (e: Error) => {
        lost ??= e;
      };
      client.on("error", onLost);
      let answered = false;
      const done = (e: Error | null, res?: R) => {
        if (answered) return;
        answered = true;
        client.off("error", onLost);
        if (e) {
          client.release(lost ?? (refusedOnly(e) ? undefined : e));
          reject(e);
        } else {
          client.release(lost ?? undefined);
          resolve(res as R);
        }
      };
      try {
        send(client, done);
      } catch (e) {
        done(e as Error);
      }
    });
  });
}
