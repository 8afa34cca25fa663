// TB_ANAG_SESSIONS00 and TB_REFRESH_TOKEN through parameterised SQL. One statement per request
// reads the session, whether its user is still active, and the user's current grants.
import { randomUUID } from "node:crypto";
import type { Grant, Queryable } from "../types.ts";
import { grantsJsonSql, normalizeGrants, type Profile, type SessionContext } from "./profile.ts";

export interface StoredSession {
  sessionId: string;
  userId: string;
  tenantId: string;
  grants: Grant[];
  context: SessionContext;
  lastActivity: Date;
  expiresAt: Date;
  userActive: boolean;
  /** The user's peso as TB_USER holds it now. */
  currentPeso: string | null;
  /**
   * The user's unit and environment as TB_USER holds them now (undefined: not read): the row
   * scope's values, so a change reaches open sessions at once (decisions.md §17).
   */
  currentCentroDett?: string | null;
  currentAmbiente?: string | null;
  /** TB_USER.CENTRI now: the further units the session may be in. */
  currentCentri?: readonly string[];
  /** The user's grants as TB_USER_GRANT holds them now. */
  currentGrants: Grant[];
}

interface SessionRow {
  SESSION_ID: string;
  USER_ID: string;
  TENANT_ID: string;
  GRANTS: unknown;
  CONTEXT: unknown;
  LAST_ACTIVITY: Date | string;
  EXPIRES_AT: Date | string;
  ACTIVE: boolean | null;
  PESO: string | null;
  CENTRO_DETT: string | null;
  CENTRI: string[] | null;
  AMBIENTE: string | null;
  CURRENT_GRANTS: unknown;
}

function toDate(v: Date | string): Date {
  return v instanceof Date ? v : new Date(v);
}

function toContext(raw: unknown): SessionContext {
  const c = (raw && typeof raw === "object" ? raw : {}) as Record<string, unknown>;
  const str = (v: unknown) => (typeof v === "string" ? v : v == null ? null : String(v));
  return {
    source: str(c.source),
    peso: str(c.peso) ?? "3",
    ambiente: str(c.ambiente),
    centro_dett: str(c.centro_dett),
    lingua: str(c.lingua),
    modulo: str(c.modulo),
    uuid: str(c.uuid),
    grants_hash: str(c.grants_hash) ?? "",
  };
}

export async function insertSession(
  db: Queryable,
  s: { userId: string; tenantId: string; profile: Profile; now: Date; expiresAt: Date },
): Promise<string> {
  const sessionId = randomUUID();
  await db.query(
    `INSERT INTO "TB_ANAG_SESSIONS00"
       ("SESSION_ID", "USER_ID", "TENANT_ID", "GRANTS", "DB_CONNECTIONS", "INTERFACE_DATA", "CONTEXT",
        "CREATED_AT", "EXPIRES_AT", "LAST_ACTIVITY")
     VALUES ($1, $2, $3, $4::jsonb, $5::jsonb, $6::jsonb, $7::jsonb, $8, $9, $8)`,
    [
      sessionId,
      s.userId,
      s.tenantId,
      JSON.stringify(s.profile.grants),
      JSON.stringify(s.profile.dbConnections),
      JSON.stringify(s.profile.interfaceData),
      JSON.stringify(s.profile.context),
      s.now,
      s.expiresAt,
    ],
  );
  return sessionId;
}

export async function findSession(db: Queryable, sessionId: string): Promise<StoredSession | null> {
  const res = await db.query<SessionRow>(
    `SELECT s."SESSION_ID", s."USER_ID", s."TENANT_ID", s."GRANTS", s."CONTEXT", s."LAST_ACTIVITY",
            s."EXPIRES_AT", u."ACTIVE", u."PESO", u."CENTRO_DETT", u."CENTRI", u."AMBIENTE", ${grantsJsonSql(`s."USER_ID"`)} AS "CURRENT_GRANTS"
       FROM "TB_ANAG_SESSIONS00" s LEFT JOIN "TB_USER" u ON u."USER_ID" = s."USER_ID"
      WHERE s."SESSION_ID" = $1`,
    [sessionId],
  );
  const row = res.rows[0];
  if (!row) return null;
  return {
    sessionId: row.SESSION_ID,
    userId: row.USER_ID,
    tenantId: row.TENANT_ID,
    grants: normalizeGrants(row.GRANTS),
    context: toContext(row.CONTEXT),
    lastActivity: toDate(row.LAST_ACTIVITY),
    expiresAt: toDate(row.EXPIRES_AT),
    userActive: row.ACTIVE === true,
    currentPeso: row.PESO,
    currentCentroDett: row.CENTRO_DETT,
    currentCentri: row.CENTRI ?? [],
    currentAmbiente: row.AMBIENTE,
    currentGrants: normalizeGrants(row.CURRENT_GRANTS),
  };
}

/** Marks activity: LAST_ACTIVITY now, EXPIRES_AT the end of the idle window from now. */
export async function touchSession(db: Queryable, sessionId: string, now: Date, expiresAt: Date) {
  await db.query(
    `UPDATE "TB_ANAG_SESSIONS00" SET "LAST_ACTIVITY" = $2, "EXPIRES_AT" = $3 WHERE "SESSION_ID" = $1`,
    [sessionId, now, expiresAt],
  );
}

/** Replaces the grant-derived parts of a session after TB_USER_GRANT changed. */
export async function updateSessionProfile(db: Queryable, sessionId: string, profile: Profile) {
  await db.query(
    `UPDATE "TB_ANAG_SESSIONS00" SET "GRANTS" = $2::jsonb, "DB_CONNECTIONS" = $3::jsonb,
            "INTERFACE_DATA" = $4::jsonb, "CONTEXT" = $5::jsonb
      WHERE "SESSION_ID" = $1`,
    [
      sessionId,
      JSON.stringify(profile.grants),
      JSON.stringify(profile.dbConnections),
      JSON.stringify(profile.interfaceData),
      JSON.stringify(profile.context),
    ],
  );
}

/** Deletes a session and its refresh tokens; true when the session existed. */
export async function deleteSession(db: Queryable, sessionId: string): Promise<boolean> {
  await db.query(`DELETE FROM "TB_REFRESH_TOKEN" WHERE "SESSION_ID" = $1`, [sessionId]);
  const res = await db.query(`DELETE FROM "TB_ANAG_SESSIONS00" WHERE "SESSION_ID" = $1`, [sessionId]);
  return res.rowCount > 0;
}

/** Removes a user's sessions that no refresh token can revive any more. */
export async function purgeDeadSessions(db: Queryable, userId: string, before: Date) {
  await db.query(
    `DELETE FROM "TB_ANAG_SESSIONS00" s WHERE s."USER_ID" = $1 AND s."EXPIRES_AT" < $2
       AND NOT EXISTS (SELECT 1 FROM "TB_REFRESH_TOKEN" r
                        WHERE r."SESSION_ID" = s."SESSION_ID" AND r."USED_AT" IS NULL AND r."EXPIRES_AT" > $2)`,
    [userId, before],
  );
  await db.query(`DELETE FROM "TB_REFRESH_TOKEN" WHERE "USER_ID" = $1 AND "EXPIRES_AT" < $2`, [
    userId,
    before,
  ]);
}
