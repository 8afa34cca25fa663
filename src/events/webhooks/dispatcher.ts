// The webhook dispatcher (spec 6.1.1, decisions.md §8): a subscriber that matches each event
// against the tenant's active registrations (a metadata event: every tenant's, metadata being
// shared) and records one delivery per match in TB_WEBHOOK_DELIVERY (idempotent on registration
// and event, so a redelivered message adds nothing). The delivery worker sends them.
import { type AccessView, viewFor, weightAllows } from "../../auth/access-view.ts";
import { grantsJsonSql, normalizeGrants } from "../../auth/profile.ts";
import { eventScope } from "../../auth/row-match.ts";
import type { PlannedFilter } from "../../query/types.ts";
import { detailData, detailFieldsOf } from "../../auth/detail-fields.ts";
import { METADATA_DIMENSIONS } from "../../metadata/data-types.ts";
import type { Database, DimensionDef, Grant, MetadataModel, Queryable } from "../../types.ts";
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

/**
 * A metadata event (a change to TB_DIM, TB_VAR, TB_COST…: AGGREGATE_TYPE is the table's code,
 * which no dimension may take). Metadata is shared by every tenant (spec decisions §6): such an
 * event concerns every tenant's registrations, whichever tenant's administrator made the change.
 */
export function isMetadataEvent(message: Pick<OutboxMessage, "AGGREGATE_TYPE">): boolean {
  return METADATA_DIMENSIONS.has(message.AGGREGATE_TYPE);
}

/** Metadata rows that describe one field (COD_VAR) of a dimension. */
const FIELD_ROWS: ReadonlySet<string> = new Set(["VAR", "COST", "OBJECT"]);

/**
 * Whether a registrant learns of a metadata change, as they would read the row through the
 * metadata endpoints (GET /DIM, /VAR, /COST: only of dimensions they may read, fields hidden by
 * their peso left out): the row's dimension (COD_DIM; a document's root) must be one a node of
 * theirs serves with read, and a field's row (VAR, COST, OBJECT) a field their peso shows. A field
 * the model no longer has (deleted) is judged by the weight the row carries (COST), else shown to
 * peso 1 alone (who sees every field). A menu node serving no dimension is seen by a registrant
 * whose grants cover it.
 */
function metadataSeen(
  model: MetadataModel,
  view: AccessView,
  registrant: { peso: number; grants: readonly Grant[] },
  message: OutboxMessage,
): boolean {
  const row = message.PAYLOAD ?? {};
  const dimCode = typeof row.COD_DIM === "string" && row.COD_DIM !== "" ? row.COD_DIM : null;
  if (dimCode === null) {
    if (message.AGGREGATE_TYPE !== "MENU") return false;
    const left = Number(row.NLEFT);
    const right = Number(row.NRIGHT);
    return registrant.grants.some((g) => g.NLEFT <= left && right <= g.NRIGHT);
  }
  if (view.nodeFor(dimCode, "read") === null) return false;
  const code = row.COD_VAR;
  if (!FIELD_ROWS.has(message.AGGREGATE_TYPE) || typeof code !== "string") return true;
  const dim = model.dimensions.get(dimCode);
  const field = dim?.fieldsByCode.get(code);
  if (dim && field) return view.fields(dim).isVisible(field);
  if (message.AGGREGATE_TYPE === "COST") {
    const weight = row.COD_UTENTE;
    return weightAllows(registrant.peso, weight === null || weight === undefined ? null : Number(weight));
  }
  return registrant.peso <= 1;
}

/** The registrant of a registration as the dispatcher reads it (null columns: none recorded). */
export interface RegistrantRow {
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
 * gone or inactive gets nothing, metadata events included. A metadata event (a table code, not a
 * dimension) reaches an active registrant whole when they may see the row (metadataSeen). Standings
 * are worked out once per batch.
 */
function registrantStandings(model: MetadataModel) {
  const standings = new Map<string, Standing>();
  const views = new Map<number, { view: AccessView; peso: number; grants: readonly Grant[] }>();
  return (
    reg: RegistrantRow & Registration & { SOURCE: string },
    message: OutboxMessage,
  ):
    | { standing: "out" }
    | { standing: "left"; key: string }
    | { standing: "in"; codes: readonly string[] | null; key: string } => {
    if (reg.CREATED_BY === null) return { standing: "in", codes: null, key: "" };
    if (!reg.ACTIVE) return { standing: "out" };
    if (isMetadataEvent(message)) {
      let seen = views.get(reg.WEBHOOK_ID);
      if (seen === undefined) {
        const inputs = registrantInputs(reg);
        seen = { view: viewFor(model, inputs), peso: inputs.peso, grants: inputs.grants };
        views.set(reg.WEBHOOK_ID, seen);
      }
      return metadataSeen(model, seen.view, seen, message)
        ? { standing: "in", codes: null, key: "" }
        : { standing: "out" };
    }
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

/** The access view inputs of a registrant (no source: every node of theirs counts). */
function registrantInputs(reg: RegistrantRow) {
  const grants = reg.ACTIVE ? normalizeGrants(reg.GRANTS) : [];
  return { grants, peso: Number(reg.PESO ?? 3), centerDett: reg.CENTRO_DETT, source: null };
}

function registrantStanding(
  model: MetadataModel,
  reg: RegistrantRow & Registration & { SOURCE: string },
  dim: DimensionDef,
): Standing {
  const inputs = registrantInputs(reg);
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
 * The body `reg`'s registrant gets of `message`, or null when they get nothing (not matching, or
 * out of their standing). Bodies are shared between registrants who read the same fields, and
 * standings worked out once, for as long as the maker is kept (a batch).
 */
export function bodyMaker(model: MetadataModel) {
  const standingOf = registrantStandings(model);
  const made = new Map<string, string>();
  return (reg: RegistrationRow, message: OutboxMessage): string | null => {
    if (!isMetadataEvent(message) && reg.SOURCE !== message.TENANT_ID) return null;
    if (!matches(reg, message)) return null;
    const seen = standingOf(reg, message);
    if (seen.standing === "out") return null;
    const k = `${message.OUTBOX_ID}\u0000${seen.key}`;
    let body = made.get(k);
    if (body === undefined) {
      body =
        seen.standing === "left" ? deliveryBody(message, true) : deliveryBody(message, false, seen.codes);
      made.set(k, body);
    }
    return body;
  };
}

/**
 * Records the deliveries, each only while its registration's registrant is still the one its body
 * was made for: the registrations are locked (FOR SHARE) until the statement commits, so a change
 * of registrant (PATCH by another administrator, which re-makes the pending bodies in its own
 * transaction: src/events/webhooks/takeover.ts) either waits for these rows and re-makes them, or
 * commits first and these are left out. Answers the events left out that way (and those of a
 * registration deleted meanwhile), to be matched again against the registrations as they are now.
 */
const QUEUE_SQL = `
  WITH queued AS (
    SELECT * FROM unnest($1::int[], $2::bigint[], $3::text[], $4::text[], $5::text[])
      AS q(webhook_id, outbox_id, event_type, body, registrant)),
  current AS (
    SELECT w."WEBHOOK_ID", w."CREATED_BY" FROM "TB_WEBHOOK" w
     WHERE w."WEBHOOK_ID" IN (SELECT webhook_id FROM queued)
       FOR SHARE),
  inserted AS (
    INSERT INTO "TB_WEBHOOK_DELIVERY" ("WEBHOOK_ID", "OUTBOX_ID", "EVENT_TYPE", "BODY")
    SELECT q.webhook_id, q.outbox_id, q.event_type, q.body
      FROM queued q JOIN current c ON c."WEBHOOK_ID" = q.webhook_id
     WHERE c."CREATED_BY" IS NOT DISTINCT FROM q.registrant
    ON CONFLICT ("WEBHOOK_ID", "OUTBOX_ID") DO NOTHING)
  SELECT DISTINCT q.outbox_id::text AS "OUTBOX_ID"
    FROM queued q LEFT JOIN current c ON c."WEBHOOK_ID" = q.webhook_id
   WHERE c."WEBHOOK_ID" IS NULL OR c."CREATED_BY" IS DISTINCT FROM q.registrant`;

/** Rounds of matching a batch whose registrations keep changing under it before it fails (and is retried). */
const MATCH_ROUNDS = 3;

/**
 * Matches a batch of events: the registrations of the batch's tenants (of every tenant when it
 * holds a metadata event) read in one statement, and the deliveries of every match written in one.
 */
export function createWebhookDispatcher(deps: {
  db: Database;
  /**
   * Where registrants (TB_USER, TB_USER_GRANT) are read when `db` is a database profile's, whose
   * registrations are there but whose users are in the main database (decisions.md §18).
   */
  usersDb?: Queryable;
  /**
   * The metadata; `refresh` (when given) is awaited before a batch holding a metadata event, so
   * that the change it reports is in the model it is judged by (the write's own refresh may not
   * have finished when its event arrives).
   */
  metadata: { current(): MetadataModel; refresh?(): Promise<unknown> };
  onQueued: () => void;
}): BatchHandler {
  const registrations = deps.usersDb
    ? registrationsApart(deps.db, deps.usersDb)
    : (tenants: string[] | null) => registrationsJoined(deps.db, tenants);
  return async function dispatch(events) {
    let messages: readonly OutboxMessage[] = events.map(parseMessage);
    if (messages.some(isMetadataEvent)) await deps.metadata.refresh?.();
    for (let round = 1; messages.length > 0; round++) {
      if (round > MATCH_ROUNDS)
        throw new Error(
          "webhook dispatcher: the registrations kept changing while their deliveries were queued",
        );
      // Metadata is every tenant's: a batch with a metadata event reads every registration.
      const tenants = messages.some(isMetadataEvent) ? null : [...new Set(messages.map((m) => m.TENANT_ID))];
      const rows = await registrations(tenants);
      if (rows.length === 0) return;
      const bodyOf = bodyMaker(deps.metadata.current());
      const webhooks: number[] = [];
      const outboxIds: string[] = [];
      const types: string[] = [];
      const bodies: string[] = [];
      const registrants: Array<string | null> = [];
      for (const message of messages) {
        for (const reg of rows) {
          const body = bodyOf(reg, message);
          if (body === null) continue;
          webhooks.push(reg.WEBHOOK_ID);
          outboxIds.push(message.OUTBOX_ID);
          types.push(message.EVENT_TYPE);
          bodies.push(body);
          registrants.push(reg.CREATED_BY);
        }
      }
      if (webhooks.length === 0) return;
      const { rows: stale } = await deps.db.query<{ OUTBOX_ID: string }>(
        QUEUE_SQL,
        [webhooks, outboxIds, types, bodies, registrants],
        PREPARED,
      );
      deps.onQueued();
      const again = new Set(stale.map((r) => r.OUTBOX_ID));
      messages = messages.filter((m) => again.has(m.OUTBOX_ID));
    }
  };
}

export type RegistrationRow = Registration & { SOURCE: string } & RegistrantRow;

const REGISTRATIONS_SQL = `
  SELECT w."WEBHOOK_ID", w."EVENTS", w."DIMENSIONS", w."FILTERS", w."SOURCE", w."CREATED_BY",
         u."PESO", u."CENTRO_DETT", u."AMBIENTE", u."ACTIVE",
         CASE WHEN w."CREATED_BY" IS NULL THEN NULL ELSE ${grantsJsonSql(`w."CREATED_BY"`)} END AS "GRANTS"
    FROM "TB_WEBHOOK" w LEFT JOIN "TB_USER" u ON u."USER_ID" = w."CREATED_BY"
   WHERE w."ACTIVE" = 'Y'`;

/**
 * The active registrations of `tenants` (null: of every tenant) with their registrants, one
 * statement (one database).
 */
async function registrationsJoined(db: Queryable, tenants: string[] | null): Promise<RegistrationRow[]> {
  const { rows } =
    tenants === null
      ? await db.query<RegistrationRow>(REGISTRATIONS_SQL, [], PREPARED)
      : await db.query<RegistrationRow>(
          `${REGISTRATIONS_SQL} AND w."SOURCE" = ANY($1::text[])`,
          [tenants],
          PREPARED,
        );
  return rows;
}

/** The same, registrations read in a profile's database and their registrants in the main's. */
function registrationsApart(db: Queryable, usersDb: Queryable) {
  return async (tenants: string[] | null): Promise<RegistrationRow[]> => {
    const sql = `SELECT w."WEBHOOK_ID", w."EVENTS", w."DIMENSIONS", w."FILTERS", w."SOURCE", w."CREATED_BY"
         FROM "TB_WEBHOOK" w WHERE w."ACTIVE" = 'Y'`;
    const { rows } =
      tenants === null
        ? await db.query<Registration & { SOURCE: string; CREATED_BY: string | null }>(sql, [], PREPARED)
        : await db.query<Registration & { SOURCE: string; CREATED_BY: string | null }>(
            `${sql} AND w."SOURCE" = ANY($1::text[])`,
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
