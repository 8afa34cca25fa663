// The live GraphQL subscriptions of this process (issue 18 §3): capped per user, per tenant (a
// share of the process's cap, so that one tenant cannot take every place: issue 35 §6) and per
// process, and each ended when what authorized it no longer holds: its session ended (logout, a
// deactivated user), its access token expired, or the user's grants or peso changed. The
// database announces every such change on "dimensio_sessions" (migrations 0006 and 0008, as for the
// session cache); a notice re-reads the sessions it concerns, and a slow safety-net poll covers a
// lost listening connection. Ending a subscription delivers one error result, then completes.
import { grantsHash } from "../auth/profile.ts";
import { SESSIONS_CHANNEL } from "../auth/session-cache.ts";
import { findSession, type StoredSession } from "../auth/sessions.ts";
import {
  type ApiError,
  AuthenticationError,
  GrantsChangedError,
  TooManySubscriptionsError,
} from "../errors.ts";
import { type TimerAt, timerAt } from "../timer-at.ts";
import type { Database, Principal } from "../types.ts";

export interface GuardDeps {
  db: Database;
  clock: () => Date;
  limits: { maxPerUser: number; maxPerProcess: number; maxPerTenant?: number };
  onError?: (err: unknown) => void;
  /** The safety-net re-check of every live subscription (the notices do the work). */
  pollMs?: number;
}

export interface Admission {
  /** Ends the subscription's watch (the stream ended on its own). */
  release(): void;
}

interface Live {
  principal: Principal;
  /** The user's grants and peso when it started. */
  baseline: string | null;
  /** Its token's expiry (epoch seconds), or null. */
  expiresAt: number | null;
  end: (err: ApiError) => void;
}

/** The live subscriptions whose tokens expire at one time, and the one timer that ends them. */
interface Expiry {
  subs: Set<Live>;
  timer: TimerAt | null;
}

export interface SubscriptionGuard {
  /**
   * Admits a subscription of `principal` whose token expires at `expiresAt` (epoch seconds), or
   * throws TooManySubscriptionsError; `end` is called once if it must stop.
   */
  admit(principal: Principal, expiresAt: number | null, end: (err: ApiError) => void): Promise<Admission>;
  /** Live subscriptions: in all, and of one user. */
  count(userId?: string): number;
  /** Live subscriptions of one tenant. */
  countOfTenant(tenantId: string): number;
  /** Ends every live subscription with `err` (the server closing: their streams end, so it can). */
  endAll(err: ApiError): void;
  stop(): Promise<void>;
}

const key = (s: Pick<StoredSession, "currentGrants" | "currentPeso">) =>
  `${grantsHash(s.currentGrants)}:${s.currentPeso ?? ""}`;

export function createSubscriptionGuard(deps: GuardDeps): SubscriptionGuard {
  const live = new Set<Live>();
  const perUser = new Map<string, number>();
  const perTenant = new Map<string, number>();
  const add = (counts: Map<string, number>, key: string, by: 1 | -1) => {
    const n = (counts.get(key) ?? 0) + by;
    if (n > 0) counts.set(key, n);
    else counts.delete(key);
  };
  const expiries = new Map<number, Expiry>();
  let unlisten: Promise<() => Promise<void>> | null = null;
  let poll: NodeJS.Timeout | null = null;
  let stopped = false;

  function forget(sub: Live) {
    if (!live.delete(sub)) return;
    const expiry = sub.expiresAt === null ? undefined : expiries.get(sub.expiresAt);
    if (expiry?.subs.delete(sub) && expiry.subs.size === 0) {
      expiry.timer?.cancel();
      expiries.delete(sub.expiresAt!);
    }
    add(perUser, sub.principal.userId, -1);
    add(perTenant, sub.principal.tenantId, -1);
    if (live.size === 0 && poll) {
      clearInterval(poll);
      poll = null;
    }
  }

  function endWith(sub: Live, err: ApiError) {
    if (!live.has(sub)) return;
    forget(sub);
    sub.end(err);
  }

  /** Re-reads the sessions of `subs` and ends those whose authorization no longer holds. */
  async function recheck(subs: Live[]): Promise<void> {
    const bySession = new Map<string, Live[]>();
    for (const sub of subs) {
      const list = bySession.get(sub.principal.sessionId) ?? [];
      list.push(sub);
      bySession.set(sub.principal.sessionId, list);
    }
    for (const [sessionId, list] of bySession) {
      let session: StoredSession | null;
      try {
        session = await findSession(deps.db, sessionId);
      } catch (err) {
        // The database is unreachable: the next notice or poll tries again.
        deps.onError?.(err);
        continue;
      }
      for (const sub of list) {
        if (!session) {
          endWith(
            sub,
            new AuthenticationError("TOKEN_INVALID", "The session of this subscription has ended."),
          );
        } else if (!session.userActive) {
          endWith(
            sub,
            new AuthenticationError("TOKEN_INVALID", "The user of this subscription is not active."),
          );
        } else if (sub.baseline !== null && key(session) !== sub.baseline) {
          endWith(sub, new GrantsChangedError());
        }
      }
    }
  }

  /**
   * Ends `sub` at its token's expiry: one timer per expiry time, shared by the subscriptions of one
   * token (a socket's, a browser tab's).
   */
  function watchExpiry(sub: Live, expiresAt: number) {
    const known = expiries.get(expiresAt);
    if (known) {
      known.subs.add(sub);
      return;
    }
    const expiry: Expiry = { subs: new Set([sub]), timer: null };
    expiries.set(expiresAt, expiry);
    expiry.timer = timerAt(expiresAt * 1000, deps.clock, () => {
      const expired = new AuthenticationError(
        "TOKEN_EXPIRED",
        "The token of this subscription has expired.",
        {
          extra: { expired_at: new Date(expiresAt * 1000).toISOString() },
        },
      );
      for (const s of [...expiry.subs]) endWith(s, expired);
    });
  }

  function onNotice(payload: string) {
    let subs: Live[];
    if (payload.startsWith("s:") || payload.startsWith("d:")) {
      const id = payload.slice(2);
      subs = [...live].filter((s) => s.principal.sessionId === id);
    } else if (payload.startsWith("u:")) {
      const id = payload.slice(2);
      subs = [...live].filter((s) => s.principal.userId === id);
    } else subs = [...live];
    if (subs.length) void recheck(subs);
  }

  function listening(): Promise<unknown> {
    unlisten ??= deps.db.listen(SESSIONS_CHANNEL, onNotice, {
      // Notices may have been missed while the connection was down: look at every session.
      onLost: () => onNotice(""),
    });
    return unlisten;
  }

  return {
    async admit(principal, expiresAt, end) {
      if (stopped) throw new TooManySubscriptionsError("process", 0);
      const { maxPerUser, maxPerProcess } = deps.limits;
      const maxPerTenant = deps.limits.maxPerTenant ?? maxPerProcess;
      if ((perUser.get(principal.userId) ?? 0) >= maxPerUser)
        throw new TooManySubscriptionsError("user", maxPerUser);
      if ((perTenant.get(principal.tenantId) ?? 0) >= maxPerTenant)
        throw new TooManySubscriptionsError("tenant", maxPerTenant);
      if (live.size >= maxPerProcess) throw new TooManySubscriptionsError("process", maxPerProcess);
      const sub: Live = { principal, baseline: null, expiresAt: null, end };
      live.add(sub);
      add(perUser, principal.userId, 1);
      add(perTenant, principal.tenantId, 1);
      try {
        await listening();
        // What authorized it, read after the watch began: a change from here on is noticed.
        const session = await findSession(deps.db, principal.sessionId);
        if (!session) throw new AuthenticationError("TOKEN_INVALID", "The session of this token has ended.");
        sub.baseline = key(session);
      } catch (err) {
        forget(sub);
        throw err;
      }
      if (expiresAt !== null) {
        sub.expiresAt = expiresAt;
        watchExpiry(sub, expiresAt);
      }
      if (!poll && deps.pollMs !== 0) {
        poll = setInterval(() => void recheck([...live]), deps.pollMs ?? 60_000);
        poll.unref();
      }
      return { release: () => forget(sub) };
    },
    count(userId) {
      return userId === undefined ? live.size : (perUser.get(userId) ?? 0);
    },
    countOfTenant(tenantId) {
      return perTenant.get(tenantId) ?? 0;
    },
    endAll(err) {
      for (const sub of [...live]) endWith(sub, err);
    },
    async stop() {
      stopped = true;
      for (const sub of [...live]) forget(sub);
      if (poll) clearInterval(poll);
      poll = null;
      if (unlisten) await unlisten.then((stop) => stop()).catch((err) => deps.onError?.(err));
    },
  };
}
