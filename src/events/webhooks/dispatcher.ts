// The webhook dispatcher (spec 6.1.1, decisions.md §8): a subscriber that matches each event
// against the tenant's active registrations and records one delivery per match in
// TB_WEBHOOK_DELIVERY (idempotent on registration and event, so a redelivered message adds
// nothing). The delivery worker sends them.
import { viewFor } from "../../auth/access-view.ts";
import { grantsJsonSql, normalizeGrants } from "../../auth/profile.ts";
import { eventScope } from "../../auth/row-match.ts";
import type { PlannedFilter } from "../../query/types.ts";
import { detailData, detailFieldsOf } from "../../auth/detail-fields.ts";
import type { Database, DimensionDef, MetadataModel, Queryable } from "../../types.ts";
import type { BatchHandler } from "../batching.ts";
import { type OutboxMessage, parseMessage } from "../bus.ts";
import { FORCE_DELETE_MARK } from "../outbox.ts";
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
 * What a registrant gets of one dimension's events (decisions.md §17): nothing when no node of
 * theirs serves the dimension with the read operation (or they are gone or inactive); else the
 * events of rows within their read rule (through the first node that lets them read it, null:
 * every row), with `data` limited to the fields they read in detail at their peso, as their own
 * subscription (src/resolvers/read/events.ts; a force delete keeps its `force` marker), and only
 * when every filter naming a field of the dimension names one they may read (L or D): matching on
 * another would disclose its value.
 */
type Standing =
  | { readable: false }
  | {
      readable: true;
      scope: PlannedFilter | null;
      codes: readonly string[];
      key: string;
      filtersOk: boolean;
    };

/**
 * How an event stands to the registration's registrant: "out" (not delivered), "left" (an update
 * took the record out of their row scope: the body carries no data; src/auth/row-match.ts) or
 * "in", with the fields of `data` (null: the whole record). A registration without a recorded
 * registrant (made before registrants were kept) gets every event whole; one whose registrant is
 * gone or inactive gets nothing, metadata events included. Metadata events (a table code, not a
 * dimension) reach an active registrant whole. Standings are worked out once per batch.
 */
function registrantStandings(model: MetadataModel) {
  const standings = new Map<string, Standing>();
  return (
    reg: RegistrantRow & Registration & { SOURCE: string },
    message: OutboxMessage,
  ):
    | { standing: "out" }
    | { standing: "left"; key: string }
    | { standing: "in"; codes: readonly string[] | null; key: string } => {
    if (reg.CREATED_BY === null) return { standing: "in", codes: null, key: "" };
    if (!reg.ACTIVE) return { standing: "out" };
    const dim = model.dimensions.get(message.AGGREGATE_TYPE);
    if (!dim) return { standing: "in", codes: null, key: "" };
    const k = `${reg.WEBHOOK_ID}\u0000${dim.code}`;
    let found = standings.get(k);
    if (found === undefined) {
      found = registrantStanding(model, reg, dim);
      standings.set(k, found);
    }
    if (!found.readable || !found.filtersOk) return { standing: "out" };
    const scope = found.scope ? eventScope(found.scope, message.PAYLOAD ?? {}, message.PREVIOUS) : "in";
    if (scope === "out") return { standing: "out" };
    if (scope === "left") return { standing: "left", key: "\u0001left" };
    return { standing: "in", codes: found.codes, key: found.key };
  };
}

function registrantStanding(
  model: MetadataModel,
  reg: RegistrantRow & Registration & { SOURCE: string },
  dim: DimensionDef,
): Standing {
  const grants = reg.ACTIVE ? normalizeGrants(reg.GRANTS) : [];
  const inputs = { grants, peso: Number(reg.PESO ?? 3), centerDett: reg.CENTRO_DETT, source: null };
  const view = viewFor(model, inputs);
  const node = view.nodeFor(dim.code, "read");
  if (node === null) return { readable: false };
  const fields = view.fields(dim);
  const detail = detailFieldsOf(dim, fields.withFlag("D"));
  // A force delete's marker (`"force": true`, docs/events.md) is no field: it stays.
  const codes = dim.fieldsByCode.has(FORCE_DELETE_MARK) ? detail.codes : [...detail.codes, FORCE_DELETE_MARK];
  const { key } = detail;
  const filtersOk = Object.keys(reg.FILTERS ?? {}).every((name) => {
    const field = dim.fieldsByCode.get(name);
    return !field || fields.allows(field, "L") || fields.allows(field, "D");
  });
  const rule = viewFor(model, { ...inputs, source: node }).rowRule(dim, "read");
  const scope = rule.unrestricted
    ? null
    : rule.bind({
        user: reg.CREATED_BY ?? "",
        tenant: reg.SOURCE,
        centro_dett: reg.CENTRO_DETT,
        ambiente: reg.AMBIENTE,
        source: node,
      });
  return { readable: true, scope, codes, key, filtersOk };
}

/**
 * Spec 6.1.2: the body a receiver gets; these exact bytes are signed. `data`: the record's fields
 * the registrant reads in detail (`codes`; null: the whole record), or null when the update took
 * the record out of the registrant's row scope (`left`, decisions.md §17).
 */
export function deliveryBody(
  message: OutboxMessage,
  left = false,
  codes: readonly string[] | null = null,
): string {
  const payload = message.PAYLOAD;
  return JSON.stringify({
    event_id: message.OUTBOX_ID,
    event_type: message.EVENT_TYPE,
    timestamp: message.CREATED_AT,
    dimension: message.AGGREGATE_TYPE,
    record_id: message.AGGREGATE_ID,
    data: left ? null : codes === null || !payload ? payload : detailData(payload, codes),
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
    const standingOf = registrantStandings(model);
    const webhooks: number[] = [];
    const outboxIds: string[] = [];
    const types: string[] = [];
    const bodies: string[] = [];
    for (const message of messages) {
      // One body per field set (registrants who read the same fields share it).
      const made = new Map<string, string>();
      for (const reg of rows) {
        if (reg.SOURCE !== message.TENANT_ID || !matches(reg, message)) continue;
        const seen = standingOf(reg, message);
        if (seen.standing === "out") continue;
        let body = made.get(seen.key);
        if (body === undefined) {
          body =
            seen.standing === "left" ? deliveryBody(message, true) : deliveryBody(message, false, seen.codes);
          made.set(seen.key, body);
        }
        webhooks.push(reg.WEBHOOK_ID);
        outboxIds.push(message.OUTBOX_ID);
        types.push(message.EVENT_TYPE);
        bodies.push(body);
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
