// How many uploads this process receives at once, per user and per tenant (issue 35 §5): an
// upload holds a slot from its first part to its answer, so stalled or slow uploads cannot pile up
// (each is bounded in time by REQUEST_TIMEOUT_MS, src/http/server.ts). Past either cap: 429 with
// Retry-After, in the standard error body.
import { ApiError } from "../errors.ts";

/** Seconds a refused upload is told to wait. */
export const UPLOAD_RETRY_AFTER_S = 1;

export class TooManyUploadsError extends ApiError {
  constructor(scope: "user" | "tenant", max: number) {
    super(
      429,
      "TOO_MANY_UPLOADS",
      "RateLimitExceeded",
      scope === "user"
        ? `A user sends at most ${max} uploads at once here; wait for one to finish.`
        : `A tenant sends at most ${max} uploads at once here; wait for one to finish.`,
      {
        details: scope === "user" ? { max_per_user: max } : { max_per_tenant: max },
        extra: { retry_after: UPLOAD_RETRY_AFTER_S },
        headers: { "Retry-After": String(UPLOAD_RETRY_AFTER_S) },
      },
    );
  }
}

export interface UploadSlotLimits {
  perUser: number;
  perTenant: number;
}

export interface UploadSlots {
  /** Takes a slot for the user and tenant (TooManyUploadsError past a cap); returns its release. */
  take(userId: string, tenantId: string): () => void;
  /** Uploads under way (tests, metrics). */
  inFlight(): number;
}

export function createUploadSlots(limits: UploadSlotLimits): UploadSlots {
  const byUser = new Map<string, number>();
  const byTenant = new Map<string, number>();
  let total = 0;
  const down = (counts: Map<string, number>, key: string) => {
    const n = (counts.get(key) ?? 1) - 1;
    if (n === 0) counts.delete(key);
    else counts.set(key, n);
  };
  return {
    take(userId, tenantId) {
      // A user is named within its tenant: the same user id in two tenants is two users.
      const user = `${tenantId}\u0000${userId}`;
      if ((byUser.get(user) ?? 0) >= limits.perUser) throw new TooManyUploadsError("user", limits.perUser);
      if ((byTenant.get(tenantId) ?? 0) >= limits.perTenant)
        throw new TooManyUploadsError("tenant", limits.perTenant);
      byUser.set(user, (byUser.get(user) ?? 0) + 1);
      byTenant.set(tenantId, (byTenant.get(tenantId) ?? 0) + 1);
      total++;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        down(byUser, user);
        down(byTenant, tenantId);
        total--;
      };
    },
    inFlight: () => total,
  };
}
