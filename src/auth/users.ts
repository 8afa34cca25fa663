// Credential checks against TB_USER. An unknown user, a wrong password, an inactive or a locked
// account all give the same answer after the same scrypt work, so none can be told apart.
import type { Queryable } from "../types.ts";
import type { ProfileUser } from "./profile.ts";
import { DUMMY_HASH, verifyPassword } from "./passwords.ts";

export interface UserRecord extends ProfileUser {
  active: boolean;
}

interface UserRow {
  USER_ID: string;
  TENANT_ID: string;
  PASSWORD_HASH: string;
  PESO: string;
  CENTRO_DETT: string | null;
  AMBIENTE: string | null;
  LINGUA: string | null;
  ACTIVE: boolean;
  LOCKED_UNTIL: Date | string | null;
}

export interface LockoutPolicy {
  /** Consecutive failures that lock the account. */
  maxFailures: number;
  lockSeconds: number;
}

function toUser(r: UserRow): UserRecord {
  return {
    userId: r.USER_ID,
    tenantId: r.TENANT_ID,
    peso: r.PESO,
    centroDett: r.CENTRO_DETT,
    ambiente: r.AMBIENTE,
    lingua: r.LINGUA,
    active: r.ACTIVE,
  };
}

export async function findUser(db: Queryable, userId: string): Promise<UserRecord | null> {
  const res = await db.query<UserRow>(
    `SELECT "USER_ID", "TENANT_ID", "PASSWORD_HASH", "PESO", "CENTRO_DETT", "AMBIENTE", "LINGUA", "ACTIVE", "LOCKED_UNTIL"
       FROM "TB_USER" WHERE "USER_ID" = $1`,
    [userId],
  );
  const row = res.rows[0];
  return row ? toUser(row) : null;
}

async function recordFailure(
  db: Queryable,
  userId: string,
  now: Date,
  policy: LockoutPolicy,
  counts: boolean,
): Promise<void> {
  await db.query(
    `UPDATE "TB_USER" SET
       "FAILED_LOGINS" = CASE WHEN "FAILED_LOGINS" + 1 >= $3 THEN 0 ELSE "FAILED_LOGINS" + 1 END,
       "LOCKED_UNTIL" = CASE WHEN "FAILED_LOGINS" + 1 >= $3 THEN $2::timestamptz + make_interval(secs => $4) ELSE "LOCKED_UNTIL" END
     WHERE "USER_ID" = $1 AND $5::boolean`,
    [userId, now, policy.maxFailures, policy.lockSeconds, counts],
  );
}

/** The user when the password is right and the account active and unlocked; null otherwise. */
export async function checkCredentials(
  db: Queryable,
  username: string,
  password: string,
  now: Date,
  policy: LockoutPolicy,
): Promise<UserRecord | null> {
  const res = await db.query<UserRow>(
    `SELECT "USER_ID", "TENANT_ID", "PASSWORD_HASH", "PESO", "CENTRO_DETT", "AMBIENTE", "LINGUA", "ACTIVE", "LOCKED_UNTIL"
       FROM "TB_USER" WHERE "USER_ID" = $1`,
    [username],
  );
  const row = res.rows[0];
  const passwordOk = await verifyPassword(password, row?.PASSWORD_HASH ?? DUMMY_HASH);
  const locked = row?.LOCKED_UNTIL != null && new Date(row.LOCKED_UNTIL).getTime() > now.getTime();
  if (!row || locked || !passwordOk || !row.ACTIVE) {
    // Every refusal runs the same statement (it counts only a wrong password of an unlocked
    // account), so an unknown, locked or inactive user cannot be told apart by timing.
    await recordFailure(db, username, now, policy, Boolean(row) && !locked && !passwordOk);
    return null;
  }
  await db.query(
    `UPDATE "TB_USER" SET "FAILED_LOGINS" = 0, "LOCKED_UNTIL" = NULL
      WHERE "USER_ID" = $1 AND ("FAILED_LOGINS" <> 0 OR "LOCKED_UNTIL" IS NOT NULL)`,
    [row.USER_ID],
  );
  return toUser(row);
}
