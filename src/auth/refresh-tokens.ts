// Refresh tokens: opaque random strings, stored as SHA-256 hashes, rotated on every use. A token
// presented a second time revokes its whole session (reuse detection, decisions.md §7).
import { createHash, randomBytes } from "node:crypto";
import { AuthenticationError } from "../errors.ts";
import type { Queryable } from "../types.ts";
import { deleteSession } from "./sessions.ts";

export function hashRefreshToken(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export async function issueRefreshToken(
  db: Queryable,
  s: { sessionId: string; userId: string; now: Date; ttlS: number },
): Promise<string> {
  const token = randomBytes(32).toString("base64url");
  await db.query(
    `INSERT INTO "TB_REFRESH_TOKEN" ("TOKEN_HASH", "SESSION_ID", "USER_ID", "CREATED_AT", "EXPIRES_AT")
     VALUES ($1, $2, $3, $4, $5)`,
    [hashRefreshToken(token), s.sessionId, s.userId, s.now, new Date(s.now.getTime() + s.ttlS * 1000)],
  );
  return token;
}

const refused = (message: string) => new AuthenticationError("REFRESH_TOKEN_INVALID", message);

/**
 * Marks a refresh token used and returns its session. Throws REFRESH_TOKEN_INVALID when it is
 * unknown or expired; when it was used before, deletes its session first.
 */
export async function consumeRefreshToken(
  db: Queryable,
  token: string,
  now: Date,
  /** Ends the session of a reused token (the caller's, so that every process forgets it). */
  revoke: (sessionId: string) => Promise<unknown> = (id) => deleteSession(db, id),
): Promise<{ sessionId: string; userId: string }> {
  const hash = hashRefreshToken(token);
  // Only a live token is claimed: an expired one is refused as expired every time, never taken
  // for reuse (which would revoke a session still renewed through X-Access-Token).
  const claimed = await db.query<{ SESSION_ID: string; USER_ID: string }>(
    `UPDATE "TB_REFRESH_TOKEN" SET "USED_AT" = $2
      WHERE "TOKEN_HASH" = $1 AND "USED_AT" IS NULL AND "EXPIRES_AT" > $2
     RETURNING "SESSION_ID", "USER_ID"`,
    [hash, now],
  );
  const row = claimed.rows[0];
  if (!row) {
    const prior = await db.query<{ SESSION_ID: string; USED_AT: Date | null; EXPIRES_AT: Date | string }>(
      `SELECT "SESSION_ID", "USED_AT", "EXPIRES_AT" FROM "TB_REFRESH_TOKEN" WHERE "TOKEN_HASH" = $1`,
      [hash],
    );
    const known = prior.rows[0];
    if (known && new Date(known.EXPIRES_AT).getTime() <= now.getTime()) {
      throw refused("The refresh token has expired. Log in again.");
    }
    if (known) {
      await revoke(known.SESSION_ID);
      throw refused("The refresh token was already used; its session is revoked. Log in again.");
    }
    throw refused("The refresh token is not valid. Log in again.");
  }
  return { sessionId: row.SESSION_ID, userId: row.USER_ID };
}
