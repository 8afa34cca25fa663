// The webhook dispatcher (spec 6.1.1, decisions.md §8): a subscriber that matches each event
// against the tenant's active registrations and records one delivery per match in
// TB_WEBHOOK_DELIVERY (idempotent on registration and event, so a redelivered message adds
// nothing). The delivery worker sends them.
import { viewFor } from "../../auth/access-view.ts";
import { grantsJsonSql, normalizeGrants } from "../../auth/profile.ts";
import { eventScope } from "../../auth/row-match.ts";
import type { PlannedFilter } from "../../query/types.ts";
import type { Database, DimensionDef, MetadataModel, Queryable } from "../../types.ts";
import type { BatchHandler } from "../batching.ts";
import { type OutboxMessage, parseMessage } from "../bus.ts";
import { PREPARED } from "../statements.ts";

export interface Registration {
  WEBHOOK_ID: number;
  EVENTS: string[];
  DIMENSIONS: string[] | null;
  FILTERS: Record<string, unknown> | null;
}

/** Spec 6.1.1: the event type listed (or `*`), the dimension listed (or none listed), every filter equal. */
export function matches(reg: Registration, message: OutboxMessage): boolean {
  if (!reg.EVENTS.includes("*") && !reg.EVENTS.includes(message.EVENT_TYPE)) return false;
  if (reg.DIMENSIONS?.length && !reg.DIMENSIONS.includes(message.AGGREGATE_TYPE)) return false;
  const data = message.PAYLOAD ?? {};
  for (const [field, wanted] of Object.entries(reg.FILTERS ?? {})) {
    const actual = data[field];
    if (actual === wanted) continue;
    // 5 and "5" are the same value to a registration written in JSON by hand.
    if (actual === undefined || actual === null || wanted === null || String(actual) !== String(wanted))
      return false;
  }
  return true;
}

/** The registrant of a registration as the dispatcher reads it (null columns: none recorded). */
interface RegistrantRow {
  CREATED_BY: string | null;
  PESO: string | null;
  CENTRO_DETT: string | null;
  AMBIENTE: string | null;
  ACTIVE: boolean | null;
  GRANTS: unknown;
}

/**
 * How an event stands to the row scope of the registration's registrant (decisions.md §17): the
 * registrant's read rule on the event's dimension, through the first node that lets them read it,
 * judged on the record the event carries and, for an update, the record before it ("left": its
 * body then carries no data; src/auth/row-match.ts). A registration without a recorded registrant
 * (made before registrants were kept) is not scoped; one whose registrant is gone or inactive gets
 * nothing of a scoped dimension. Rules are worked out once per batch.
 */
function registrantScopes(model: MetadataModel) {
  const rules = new Map<string, PlannedFilter | null>();
  return (
    reg: RegistrantRow & { WEBHOOK_ID: number; SOURCE: string },
    message: OutboxMessage,
  ): "in" | "left" | "out" => {
    if (reg.CREATED_BY === null) return "in";
    const dim = model.dimensions.get(message.AGGREGATE_TYPE);
    if (!dim) return "in";
    const key = `${reg.WEBHOOK_ID}\u0000${dim.code}`;
    let scope = rules.get(key);
    if (scope === undefined) {
      scope = registrantScope(model, reg, dim);
      rules.set(key, scope);
    }
    return eventScope(scope, message.PAYLOAD ?? {}, message.PREVIOUS);
  };
}

function registrantScope(
  model: MetadataModel,
  reg: RegistrantRow & { SOURCE: string },
  dim: DimensionDef,
): PlannedFilter | null {
  const grants = reg.ACTIVE ? normalizeGrants(reg.GRANTS) : [];
  const inputs = { grants, peso: Number(reg.PESO ?? 3), centerDett: reg.CENTRO_DETT, source: null };
  const node = viewFor(model, inputs).nodeFor(dim.code, "read");
  const rule = viewFor(model, { ...inputs, source: node }).rowRule(dim, "read");
  if (rule.unrestricted) return null;
  return rule.bind({
    user: reg.CREATED_BY ?? "",
    tenant: reg.SOURCE,
    centro_dett: reg.CENTRO_DETT,
    ambiente: reg.AMBIENTE,
    source: node,
  });
}

/**
 * Spec 6.1.2: the body a receiver gets; these exact bytes are signed. `left`: the update took the
 * record out of the registrant's row scope, and `data` is null (decisions.md §17).
 */
export function deliveryBody(message: OutboxMessage, left = false): string {
  return JSON.stringify({
    event_id: message.OUTBOX_ID,
    event_type: message.EVENT_TYPE,
    timestamp: message.CREATED_AT,
    dimension: message.AGGREGATE_TYPE,
    record_id: message.AGGREGATE_ID,
    data: left ? null : message.PAYLOAD,
  });
}

/**
 * Matches a batch of events: the registrations of the batch's tenants read in one statement, and
 * the deliveries of every match written in one.
 */
export function createWebhookDispatcher(deps: {
  db: Database;
  /**
   * Where registrants (TB_USER, TB_USER_GRANT) are read when `db` is a database profile's, whose
   * registrations are there but whose users are in the main database (decisions.md §18).
   */
  usersDb?: Queryable;
  metadata: { current(): MetadataModel };
  onQueued: () => void;
}): BatchHandler {
  const registrations = deps.usersDb
    ? registrationsApart(deps.db, deps.usersDb)
    : (tenants: string[]) => registrationsJoined(deps.db, tenants);
  return async function dispatch(events) {
    const messages = events.map(parseMessage);
    const tenants = [...new Set(messages.map((m) => m.TENANT_ID))];
    const rows = await registrations(tenants);
    if (rows.length === 0) return;
    const model = deps.metadata.current();
    const inScope = registrantScopes(model);
    const webhooks: number[] = [];
    const outboxIds: string[] = [];
    const types: string[] = [];
    const bodies: string[] = [];
    for (const message of messages) {
      let body: string | null = null;
      let leftBody: string | null = null;
      for (const reg of rows) {
        if (reg.SOURCE !== message.TENANT_ID || !matches(reg, message)) continue;
        const standing = inScope(reg, message);
        if (standing === "out") continue;
        webhooks.push(reg.WEBHOOK_ID);
        outboxIds.push(message.OUTBOX_ID);
        types.push(message.EVENT_TYPE);
        if (standing === "left") {
          leftBody ??= deliveryBody(message, true);
          bodies.push(leftBody);
        } else {
          body ??= deliveryBody(message);
          bodies.push(body);
        }
      }
    }
    if (webhooks.length === 0) return;
    await deps.db.query(
      `INSERT INTO "TB_WEBHOOK_DELIVERY" ("WEBHOOK_ID", "OUTBOX_ID", "EVENT_TYPE", "BODY")
       SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[], $4::text[])
       ON CONFLICT ("WEBHOOK_ID", "OUTBOX_ID") DO NOTHING`,
      [webhooks, outboxIds, types, bodies],
      PREPARED,
    );
    deps.onQueued();
  };
}

type RegistrationRow = Registration & { SOURCE: string } & RegistrantRow;

/** The active registrations of `tenants` with their registrants, one statement (one database). */
async function registrationsJoined(db: Queryable, tenants: string[]): Promise<RegistrationRow[]> {
  const { rows } = await db.query<RegistrationRow>(
    `SELECT w."WEBHOOK_ID", w."EVENTS", w."DIMENSIONS", w."FILTERS", w."SOURCE", w."CREATED_BY",
              u."PESO", u."CENTRO_DETT", u."AMBIENTE", u."ACTIVE",
              CASE WHEN w."CREATED_BY" IS NULL THEN NULL ELSE ${grantsJsonSql(`w."CREATED_BY"`)} END AS "GRANTS"
         FROM "TB_WEBHOOK" w LEFT JOIN "TB_USER" u ON u."USER_ID" = w."CREATED_BY"
        WHERE w."SOURCE" = ANY($1::text[]) AND w."ACTIVE" = 'Y'`,
    [tenants],
    PREPARED,
  );
  return rows;
}

/** The same, registrations read in a profile's database and their registrants in the main's. */
function registrationsApart(db: Queryable, usersDb: Queryable) {
  return async (tenants: string[]): Promise<RegistrationRow[]> => {
    const { rows } = await db.query<Registration & { SOURCE: string; CREATED_BY: string | null }>(
      `SELECT w."WEBHOOK_ID", w."EVENTS", w."DIMENSIONS", w."FILTERS", w."SOURCE", w."CREATED_BY"
         FROM "TB_WEBHOOK" w WHERE w."SOURCE" = ANY($1::text[]) AND w."ACTIVE" = 'Y'`,
      [tenants],
      PREPARED,
    );
    const users = [...new Set(rows.flatMap((r) => (r.CREATED_BY === null ? [] : [r.CREATED_BY])))];
    if (rows.length === 0) return [];
    const registrants = new Map<string, Omit<RegistrantRow, "CREATED_BY">>();
    if (users.length > 0) {
      const found = await usersDb.query<Omit<RegistrantRow, "CREATED_BY"> & { USER_ID: string }>(
        `SELECT u."USER_ID", u."PESO", u."CENTRO_DETT", u."AMBIENTE", u."ACTIVE", ${grantsJsonSql(`u."USER_ID"`)} AS "GRANTS"
           FROM "TB_USER" u WHERE u."USER_ID" = ANY($1::text[])`,
        [users],
        PREPARED,
      );
      for (const { USER_ID, ...r } of found.rows) registrants.set(USER_ID, r);
    }
    const none = { PESO: null, CENTRO_DETT: null, AMBIENTE: null, ACTIVE: null, GRANTS: null };
    return rows.map((r) => ({ ...r, ...((r.CREATED_BY && registrants.get(r.CREATED_BY)) || none) }));
  };
}
