// What a request of a tenant uses of its database (decisions.md §18): the handle, where reads go,
// the totals cache, the group commit of creates and Prisma, made once per database (the main's are
// the service's own; a profile's on its first use), and the tenant's view of the services with
// them in place of the main's. Metadata, users and sessions stay on the main database: whoever
// needs those keeps the main services (auth, metadata routes).
import type { DatabaseHandle } from "./db/database.ts";
import type { DatabaseProfiles } from "./db/profiles.ts";
import { tenantMovingError } from "./db/profiles.ts";
import type { PrismaClient } from "./db/prisma.ts";
import type { CreateGroups } from "./resolvers/write/create-groups.ts";
import type { CachedTotal, TotalsCache } from "./resolvers/read/totals-cache.ts";
import type { Queryable } from "./types.ts";

/** The parts of the services that belong to one database. */
export interface DatabaseParts {
  /** The profile's name; null for the main database. */
  database: string | null;
  db: DatabaseHandle;
  readDb: Queryable;
  totals: TotalsCache;
  creates: CreateGroups | null;
  readonly prisma: PrismaClient;
}

/** The per-database members of a services object: what a tenant's view replaces. */
export type TenantScoped = DatabaseParts;

/**
 * A totals cache made in the background (its LISTEN needs the database; tried again every
 * `retryMs` while the database does not answer): until it is there, nothing is kept. A mark taken
 * before it was there is never honoured by it.
 */
export function lateTotals(
  make: () => Promise<TotalsCache>,
  onError: (err: unknown) => void,
  retryMs = 2000,
): TotalsCache {
  let inner: TotalsCache | null = null;
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  const attempt = () => {
    make().then(
      (cache) => {
        if (stopped) void cache.stop();
        else inner = cache;
      },
      (err) => {
        onError(err);
        if (stopped) return;
        timer = setTimeout(attempt, retryMs);
        timer.unref();
      },
    );
  };
  attempt();
  const NONE = -1;
  return {
    get: (key: string): CachedTotal | undefined => inner?.get(key),
    mark: () => (inner ? inner.mark() : NONE),
    set(key, total, mark, scope) {
      if (inner && mark !== NONE) inner.set(key, total, mark, scope);
    },
    size: () => inner?.size() ?? 0,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await inner?.stop();
    },
  };
}

/**
 * The handle a moving tenant's writes get (tenant:move): transactions and the write helpers are
 * refused with 503 TENANT_MOVING; plain statements (reads) go on.
 */
export function writesRefused(db: DatabaseHandle, tenantId: string): DatabaseHandle {
  return new Proxy(db, {
    get(target, prop, receiver) {
      if (prop === "transaction") return () => Promise.reject(tenantMovingError(tenantId));
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

export interface TenantViews<S extends TenantScoped> {
  /** The services of database `name` (null: the main), made on first use. */
  atDatabase(name: string | null): S;
  /**
   * The services of the tenant's database: 503 DATABASE_UNAVAILABLE while its profile is not
   * reachable, writes refused with 503 TENANT_MOVING while it is being moved.
   */
  forTenant(tenantId: string): S;
  /** Every database's parts made so far (closing, the event runtime). */
  made(): DatabaseParts[];
}

/**
 * Views of `base` per database: `base` itself for the main, an object inheriting from it with the
 * profile's parts otherwise (made by `make` once per profile).
 */
export function tenantViews<S extends TenantScoped>(
  base: S,
  profiles: DatabaseProfiles,
  make: (name: string) => DatabaseParts,
): TenantViews<S> {
  const parts = new Map<string, DatabaseParts>();
  const views = new Map<string, S>();
  const moving = new Map<string, S>();
  // Writable: views of views (GraphQL's per tenant, src/graphql/plugin.ts) set their own.
  const own = (value: unknown) => ({ value, enumerable: true, writable: true, configurable: true });
  // A moving tenant's view: transactions refused, and Prisma (webhook registrations) too.
  const view = (from: S | DatabaseParts, movingTenant?: string): S =>
    Object.create(base, {
      database: own(from.database),
      db: own(movingTenant === undefined ? from.db : writesRefused(from.db, movingTenant)),
      readDb: own(from.readDb),
      totals: own(from.totals),
      creates: own(from.creates),
      prisma: {
        get: () => {
          if (movingTenant !== undefined) throw tenantMovingError(movingTenant);
          return from.prisma;
        },
        enumerable: true,
        configurable: true,
      },
    }) as S;
  const atDatabase = (name: string | null): S => {
    if (name === null) return base;
    let v = views.get(name);
    if (!v) {
      let p = parts.get(name);
      if (!p) {
        p = make(name);
        parts.set(name, p);
      }
      v = view(p);
      views.set(name, v);
    }
    return v;
  };
  return {
    atDatabase,
    forTenant(tenantId) {
      const name = profiles.profileFor(tenantId);
      const at = atDatabase(name);
      if (!profiles.placement(tenantId).moving) return at;
      const key = `${tenantId}\u0000${name ?? ""}`;
      let v = moving.get(key);
      if (!v) {
        v = view(at, tenantId);
        moving.set(key, v);
        if (moving.size > 1000) moving.delete(moving.keys().next().value as string);
      }
      return v;
    },
    made: () => [...parts.values()],
  };
}
