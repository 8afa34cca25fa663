// Database profiles (decisions.md §18, issue 36 §2): the main database holds metadata, tenants,
// users and sessions, and the records of every tenant without a database of its own; profile NAME
// (DATABASE_URL_<NAME>) holds the records, outbox, webhooks, search and analytics of the tenants
// whose TB_TENANT.DATABASE names it.
//
// - Each profile's handle is opened on its first use, with the main's options (the caller's
//   `open`), and readied once (`prepare`: migrations and the DDL sync) before a tenant's request
//   may use it. A profile that cannot be readied (unreachable) answers its tenants 503
//   DATABASE_UNAVAILABLE and is tried again every `retryMs` (and at a request of its tenant), so
//   it recovers alone; other tenants are not affected.
// - The tenant → profile map is kept in memory, read at start and again whenever the database
//   announces a change of TB_TENANT ("dimensio_tenants", migration 0018), or the listening
//   connection is back after a loss.
import type { Logger } from "../logger.ts";
import type { DatabaseProfileConfig } from "../types.ts";
import type { DatabaseHandle } from "./database.ts";
import { databaseProfileOf, databaseUnavailableError, tagDatabaseProfile } from "./errors.ts";
import { ApiError } from "../errors.ts";

/** The NOTIFY channel of TB_TENANT changes (migration 0018's trigger; payload: the TENANT_ID). */
export const TENANTS_CHANNEL = "dimensio_tenants";

/** How long a profile that could not be readied waits before it is tried again. */
export const PROFILE_RETRY_MS = 2000;

/** Seconds a writer of a moving tenant is asked to wait. */
export const TENANT_MOVING_RETRY_S = 2;

/** A tenant names a profile that is not configured (start-up and import fail with it). */
export class UnknownProfileError extends Error {
  constructor(
    readonly tenantId: string,
    readonly profile: string,
  ) {
    super(
      `Tenant ${tenantId} names the database profile ${profile} (TB_TENANT.DATABASE), which is not configured: set DATABASE_URL_${profile}, or change the tenant's DATABASE.`,
    );
    this.name = "UnknownProfileError";
  }
}

/**
 * 503 for a request of a tenant whose profile is unreachable or not readied yet; the same answer
 * when its database goes away under a request (the profile's handle tags its errors: taggedHandle).
 */
export function profileUnavailableError(profile: string, cause?: unknown): ApiError {
  return databaseUnavailableError(cause, profile);
}

/** The promise's rejection tagged with `profile`. */
function tagging(result: unknown, profile: string): unknown {
  if (result instanceof Promise)
    return result.catch((err: unknown) => {
      tagDatabaseProfile(err, profile);
      throw err;
    });
  return result;
}

/**
 * `target` whose methods' rejections are tagged with `profile` (tagDatabaseProfile), so that a
 * request of the profile's tenant that meets its database gone is answered naming the profile
 * (databaseApiError). A transaction's statements are tagged, the errors of its callback's other
 * work (another database's) are not. Everything else is the target's own.
 */
function taggedHandle<T extends object>(target: T, profile: string): T {
  const wrapped = new WeakMap<object, unknown>();
  const wrap = (method: (...args: unknown[]) => unknown, transaction: boolean) =>
    transaction
      ? (work: (tx: object) => Promise<unknown>, ...rest: unknown[]) => {
          // Errors the callback threw untagged are its own work's: they are not the profile's.
          const own = new WeakSet<object>();
          const run = method.call(
            target,
            async (tx: object) => {
              try {
                return await work(taggedHandle(tx, profile));
              } catch (err) {
                if (err && typeof err === "object" && databaseProfileOf(err) === null) own.add(err);
                throw err;
              }
            },
            ...rest,
          ) as Promise<unknown>;
          return run.catch((err: unknown) => {
            if (!(err && typeof err === "object" && own.has(err))) tagDatabaseProfile(err, profile);
            throw err;
          });
        }
      : (...args: unknown[]) => tagging(method.apply(target, args), profile);
  return new Proxy(target, {
    get(t, prop) {
      const value = Reflect.get(t, prop, t) as unknown;
      if (typeof value !== "function") return value;
      let fn = wrapped.get(value);
      if (fn === undefined) {
        fn = wrap(value as (...args: unknown[]) => unknown, prop === "transaction");
        wrapped.set(value, fn);
      }
      return fn;
    },
  });
}

/** 503 for a write of a tenant that tenant:move is moving (its reads go on). */
export function tenantMovingError(tenantId: string): ApiError {
  return new ApiError(
    503,
    "TENANT_MOVING",
    "ServiceUnavailable",
    `Tenant ${tenantId} is being moved to another database: writes are refused until it is done; retry shortly.`,
    { headers: { "Retry-After": String(TENANT_MOVING_RETRY_S) }, details: { tenant: tenantId } },
  );
}

export interface TenantPlacement {
  /** The profile (upper-case), null for the main database. */
  profile: string | null;
  /** tenant:move is copying its rows: writes are refused. */
  moving: boolean;
}

export type ProfileState = "idle" | "ready" | "pending";

export interface DatabaseProfilesOptions {
  main: DatabaseHandle;
  profiles: Record<string, DatabaseProfileConfig>;
  /** Opens a profile's handle (the main's options: src/services.ts). */
  open: (url: string, name: string) => DatabaseHandle;
  /** Readies a profile's database: migrations and the DDL sync. Run until it succeeds once. */
  prepare: (name: string, db: DatabaseHandle) => Promise<void>;
  logger?: Logger | null;
  retryMs?: number;
}

export interface DatabaseProfiles {
  readonly main: DatabaseHandle;
  /** The configured profiles' names (upper-case), in the order configured. */
  readonly names: readonly string[];
  /** Profile `name`'s handle, opened on first use; null: the main. */
  handle(name: string | null): DatabaseHandle;
  /** Profile `name`'s read handle (DATABASE_READ_URL_<NAME>), else its handle. */
  readHandle(name: string | null): DatabaseHandle;
  /** Where a tenant lives now (main for a tenant the map does not know). */
  placement(tenantId: string): TenantPlacement;
  /**
   * The name of the tenant's profile, null for main, once it is ready; 503 DATABASE_UNAVAILABLE
   * naming the profile while it is not (and a new attempt to ready it, at most every retryMs).
   */
  profileFor(tenantId: string): string | null;
  /** Whether profile `name` is readied (migrations and DDL sync applied). */
  state(name: string): ProfileState;
  /** Readies every profile now (at start: the ones that fail are retried in the background). */
  start(): Promise<void>;
  /** Reads the tenant → profile map again (what a TB_TENANT notice does). */
  refresh(): Promise<void>;
  /** Tries to ready profile `name` now; resolves true when it is ready. */
  prepare(name: string): Promise<boolean>;
  /** Profile `name` must be readied again (a metadata change did not reach it): 503 until it is. */
  reset(name: string, cause?: unknown): void;
  /** Told after each refresh of the map (tests wait on it). */
  onRefresh(listener: () => void): () => void;
  close(): Promise<void>;
}

interface Slot {
  name: string;
  config: DatabaseProfileConfig;
  db: DatabaseHandle | null;
  read: DatabaseHandle | null;
  state: ProfileState;
  preparing: Promise<boolean> | null;
  lastAttempt: number;
}

/** The tenant → profile map of TB_TENANT; unknown profiles are collected, not thrown. */
export async function readPlacements(
  db: Pick<DatabaseHandle, "query">,
): Promise<Map<string, { profile: string | null; moving: boolean }>> {
  const { rows } = await db.query<{ TENANT_ID: string; DATABASE: string | null; MOVING: boolean }>(
    `SELECT "TENANT_ID", upper("DATABASE") AS "DATABASE", "MOVING_SINCE" IS NOT NULL AS "MOVING"
       FROM "TB_TENANT" WHERE "DATABASE" IS NOT NULL OR "MOVING_SINCE" IS NOT NULL`,
  );
  return new Map(rows.map((r) => [r.TENANT_ID, { profile: r.DATABASE, moving: r.MOVING }]));
}

/** The first tenant of `placements` naming a profile not in `names`, as an error; null if none. */
export function unknownProfileOf(
  placements: ReadonlyMap<string, { profile: string | null }>,
  names: readonly string[],
): UnknownProfileError | null {
  for (const [tenant, p] of placements) {
    if (p.profile !== null && !names.includes(p.profile)) return new UnknownProfileError(tenant, p.profile);
  }
  return null;
}

export function createDatabaseProfiles(opts: DatabaseProfilesOptions): DatabaseProfiles {
  const { main } = opts;
  const retryMs = opts.retryMs ?? PROFILE_RETRY_MS;
  const slots = new Map<string, Slot>(
    Object.entries(opts.profiles).map(([name, config]) => [
      name,
      { name, config, db: null, read: null, state: "idle", preparing: null, lastAttempt: 0 },
    ]),
  );
  const names = [...slots.keys()];
  let placements = new Map<string, { profile: string | null; moving: boolean }>();
  let unlisten: (() => Promise<void>) | null = null;
  let retryTimer: NodeJS.Timeout | null = null;
  let closed = false;
  const listeners = new Set<() => void>();

  const slotOf = (name: string): Slot => {
    const slot = slots.get(name);
    if (!slot) throw new Error(`database profile ${name} is not configured (DATABASE_URL_${name})`);
    return slot;
  };
  const handle = (name: string | null): DatabaseHandle => {
    if (name === null) return main;
    const slot = slotOf(name);
    slot.db ??= taggedHandle(opts.open(slot.config.url, name), name);
    return slot.db;
  };

  async function prepare(name: string): Promise<boolean> {
    const slot = slotOf(name);
    if (slot.state === "ready") return true;
    slot.preparing ??= (async () => {
      slot.lastAttempt = Date.now();
      try {
        await opts.prepare(name, handle(name));
        slot.state = "ready";
        opts.logger?.info({ profile: name }, "database profile ready");
        return true;
      } catch (err) {
        slot.state = "pending";
        opts.logger?.error(
          { profile: name, err: err instanceof Error ? err.message : String(err) },
          `database profile ${name} cannot be readied (DATABASE_URL_${name}); its tenants are answered 503 until it can`,
        );
        scheduleRetry();
        return false;
      } finally {
        slot.preparing = null;
      }
    })();
    return slot.preparing;
  }

  function scheduleRetry(): void {
    if (closed || retryTimer) return;
    retryTimer = setTimeout(() => {
      retryTimer = null;
      for (const slot of slots.values()) if (slot.state === "pending") void prepare(slot.name);
    }, retryMs);
    retryTimer.unref();
  }

  async function refresh(): Promise<void> {
    placements = await readPlacements(main);
    const unknown = unknownProfileOf(placements, names);
    if (unknown) opts.logger?.error({ tenant: unknown.tenantId, profile: unknown.profile }, unknown.message);
    for (const l of listeners) l();
  }

  return {
    main,
    names,
    handle,
    readHandle(name) {
      if (name === null) return main;
      const slot = slotOf(name);
      if (!slot.config.readUrl) return handle(name);
      slot.read ??= taggedHandle(opts.open(slot.config.readUrl, `${name} (read)`), name);
      return slot.read;
    },
    placement(tenantId) {
      const p = placements.get(tenantId);
      return p ?? { profile: null, moving: false };
    },
    profileFor(tenantId) {
      const p = placements.get(tenantId);
      if (!p || p.profile === null) return null;
      const slot = slots.get(p.profile);
      if (!slot) {
        const unknown = new UnknownProfileError(tenantId, p.profile);
        throw Object.assign(profileUnavailableError(p.profile, unknown), { message: unknown.message });
      }
      if (slot.state !== "ready") {
        if (Date.now() - slot.lastAttempt >= retryMs) void prepare(slot.name);
        throw profileUnavailableError(slot.name);
      }
      return slot.name;
    },
    state: (name) => slotOf(name).state,
    async start() {
      placements = await readPlacements(main);
      const unknown = unknownProfileOf(placements, names);
      if (unknown) throw unknown;
      unlisten = await main.listen(TENANTS_CHANNEL, () => {
        refresh().catch((err) =>
          opts.logger?.warn({ err: err instanceof Error ? err.message : String(err) }, "tenant map not read"),
        );
      });
      await Promise.all(names.map((n) => prepare(n)));
    },
    refresh,
    prepare,
    reset(name, cause) {
      const slot = slotOf(name);
      slot.state = "pending";
      opts.logger?.error(
        { profile: name, err: cause instanceof Error ? cause.message : String(cause) },
        `database profile ${name} missed a metadata change; readied again before its tenants are served`,
      );
      void prepare(name);
    },
    onRefresh(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async close() {
      closed = true;
      if (retryTimer) clearTimeout(retryTimer);
      await unlisten?.().catch(() => {});
      for (const slot of slots.values()) {
        await slot.preparing?.catch(() => {});
        await slot.read?.close().catch(() => {});
        await slot.db?.close().catch(() => {});
      }
    },
  };
}
