// Credential checks against TB_USER. An unknown user, a wrong password, an inactive or a locked
// account all give the same answer after the same scrypt work, so none can be told apart. Locks
// are per user and client address (./lockout.ts).
import type { Queryable } from "../types.ts";
import { clearFailures, type LockoutPolicy, recordFailure } from "./lockout.ts";
import type { ProfileUser } from "./profile.ts";
import { DUMMY_HASH, verifyPassword } from "./passwords.ts";

export interface UserRecord extends ProfileUser {
  active: boolean;
  /** TB_USER.CENTRI: the further units the user may log in to (decisions.md §17). */
  centri: readonly string[];
}

interface UserRow {
  USER_ID: string;
  TENANT_ID: string;
  PASSWORD_HASH: string;
  PESO: string;
  CENTRO_DETT: string | null;
  CENTRI: string[] | null;
  AMBIENTE: string | null;
  LINGUA: string | null;
  ACTIVE: boolean;
  LOCKED_UNTIL: Date | string | null;
}

interface CredentialRow extends UserRow {
  /** This client address's lock (TB_LOGIN_FAILURE), null when none. */
  CLIENT_LOCKED_UNTIL: Date | string | null;
  /** Failures counted from this client address (null: no row). */
  CLIENT_FAILURES: number | null;
}

const lockedAt = (until: Date | string | null, now: Date) =>
  until != null && new Date(until).getTime() > now.getTime();

function toUser(r: UserRow): UserRecord {
  return {
    userId: r.USER_ID,
    tenantId: r.TENANT_ID,
    peso: r.PESO,
    centroDett: r.CENTRO_DETT,
    ambiente: r.AMBIENTE,
    lingua: r.LINGUA,
    active: r.ACTIVE,
    centri: r.CENTRI ?? [],
  };
}

export async function findUser(db: Queryable, userId: string): Promise<UserRecord | null> {
  const res = await db.query<UserRow>(
    `SELECT "USER_ID", "TENANT_ID", "PASSWORD_HASH", "PESO", "CENTRO_DETT", "CENTRI", "AMBIENTE", "LINGUA", "ACTIVE", "LOCKED_UNTIL"
       FROM "TB_USER" WHERE "USER_ID" = $1`,
    [userId],
  );
  const row = res.rows[0];
  return row ? toUser(row) : null;
}

/**
 * The user when the password is right and the account active and unlocked, from this client
 * (`clientKey`, see lockout.ts) and for everyone (TB_USER.LOCKED_UNTIL, an operator's lock);
 * null otherwise.
 */
export async function checkCredentials(
  db: Queryable,
  username: string,
  password: string,
  now: Date,
  policy: LockoutPolicy,
  clientKey: string,
): Promise<UserRecord | null> {
  const res = await db.query<CredentialRow>(
    `SELECT u."USER_ID", u."TENANT_ID", u."PASSWORD_HASH", u."PESO", u."CENTRO_DETT", u."CENTRI", u."AMBIENTE", u."LINGUA",
            u."ACTIVE", u."LOCKED_UNTIL", f."LOCKED_UNTIL" AS "CLIENT_LOCKED_UNTIL", f."FAILURES" AS "CLIENT_FAILURES"
       FROM "TB_USER" u
       LEFT JOIN "TB_LOGIN_FAILURE" f ON f."USER_ID" = u."USER_ID" AND f."CLIENT_KEY" = $2
      WHERE u."USER_ID" = $1`,
    [username, clientKey],
  );
  const row = res.rows[0];
  const passwordOk = await verifyPassword(password, row?.PASSWORD_HASH ?? DUMMY_HASH);
  const locked =
    Boolean(row) && (lockedAt(row!.LOCKED_UNTIL, now) || lockedAt(row!.CLIENT_LOCKED_UNTIL, now));
  if (!row || locked || !passwordOk || !row.ACTIVE) {
    // Every refusal runs the same statement (it counts only a wrong password of an unlocked
    // account), so an unknown, locked or inactive user cannot be told apart by timing.
    await recordFailure(db, username, clientKey, now, policy, Boolean(row) && !locked && !passwordOk);
    return null;
  }
  if (row.CLIENT_FAILURES !== null) await clearFailures(db, row.USER_ID, clientKey);
  return toUser(row);
}
