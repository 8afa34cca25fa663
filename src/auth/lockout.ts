// The login lockout, per user and client address (issue 18 §4, docs/decisions.md "Login lockout per
// client address"): wrong passwords are counted in TB_LOGIN_FAILURE per (USER_ID, CLIENT_KEY), and
// maxFailures of them lock that user from that address for lockSeconds. An attacker elsewhere
// locks the user out of nowhere but the attacker's own address. Failures older than lockSeconds
// are forgotten. TB_USER.LOCKED_UNTIL stays an operator's lock from every address.
import net from "node:net";
import type { Queryable } from "../types.ts";

export interface LockoutPolicy {
  /** Failures from one client address that lock the account there. */
  maxFailures: number;
  lockSeconds: number;
}

/**
 * Whom failures are counted against: an IPv4 address (also written IPv4-mapped) as it is, an
 * IPv6 address by its /64 (one subscriber's network holds 2^64 of them), anything else as given.
 */
export function clientKey(address: string): string {
  const bare = address.replace(/%.*$/, "");
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(bare);
  if (mapped) return mapped[1]!;
  if (net.isIPv4(bare)) return bare;
  if (!net.isIPv6(bare)) return bare.slice(0, 64) || "unknown";
  const [head, tail = ""] = bare.toLowerCase().split("::");
  const left = head ? head.split(":") : [];
  const right = tail ? tail.split(":") : [];
  // A dotted IPv4 tail takes two groups.
  const width = (groups: string[]) => groups.reduce((n, g) => n + (g.includes(".") ? 2 : 1), 0);
  const zeros = bare.includes("::") ? 8 - width(left) - width(right) : 0;
  const groups = [...left, ...new Array<string>(Math.max(0, zeros)).fill("0"), ...right];
  const prefix = groups.slice(0, 4).map((g) => Number.parseInt(g, 16).toString(16));
  return `${prefix.join(":")}::/64`;
}

/** One failed attempt: counted when `counts` (the user exists, was not locked, password wrong). */
export async function recordFailure(
  db: Queryable,
  userId: string,
  key: string,
  now: Date,
  policy: LockoutPolicy,
  counts: boolean,
): Promise<void> {
  // One statement on every refusal (a no-op unless `counts`), so that an unknown, locked or
  // inactive user cannot be told apart by timing. It also drops the user's counters from other
  // addresses that have run out, so the table holds what the last lockSeconds left.
  await db.query(
    `WITH "expired" AS (
       DELETE FROM "TB_LOGIN_FAILURE"
        WHERE $6::boolean AND "USER_ID" = $1 AND "CLIENT_KEY" <> $2
          AND "LAST_FAILURE" <= $3::timestamptz - make_interval(secs => $5)
          AND ("LOCKED_UNTIL" IS NULL OR "LOCKED_UNTIL" <= $3::timestamptz))
     INSERT INTO "TB_LOGIN_FAILURE" AS f ("USER_ID", "CLIENT_KEY", "FAILURES", "LOCKED_UNTIL", "LAST_FAILURE")
     SELECT $1, $2,
            CASE WHEN 1 >= $4 THEN 0 ELSE 1 END,
            CASE WHEN 1 >= $4 THEN $3::timestamptz + make_interval(secs => $5) END,
            $3::timestamptz
      WHERE $6::boolean
     ON CONFLICT ("USER_ID", "CLIENT_KEY") DO UPDATE SET
       "FAILURES" = CASE WHEN (CASE WHEN f."LAST_FAILURE" > $3::timestamptz - make_interval(secs => $5)
                                    THEN f."FAILURES" ELSE 0 END) + 1 >= $4
                         THEN 0
                         ELSE (CASE WHEN f."LAST_FAILURE" > $3::timestamptz - make_interval(secs => $5)
                                    THEN f."FAILURES" ELSE 0 END) + 1 END,
       "LOCKED_UNTIL" = CASE WHEN (CASE WHEN f."LAST_FAILURE" > $3::timestamptz - make_interval(secs => $5)
                                        THEN f."FAILURES" ELSE 0 END) + 1 >= $4
                             THEN $3::timestamptz + make_interval(secs => $5)
                             ELSE f."LOCKED_UNTIL" END,
       "LAST_FAILURE" = $3::timestamptz`,
    [userId, key, now, policy.maxFailures, policy.lockSeconds, counts],
  );
}

/** A successful login clears the failures of its own address (not those of other addresses). */
export async function clearFailures(db: Queryable, userId: string, key: string): Promise<void> {
  await db.query(`DELETE FROM "TB_LOGIN_FAILURE" WHERE "USER_ID" = $1 AND "CLIENT_KEY" = $2`, [userId, key]);
}
