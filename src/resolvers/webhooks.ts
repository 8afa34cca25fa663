// Webhook registrations (spec 2.7 and 4.7, decisions.md §8): create, list, read, change, remove,
// and the delivery log. Tenant-scoped (TB_WEBHOOK.SOURCE holds the tenant), level 4 (the
// TenantAdmin proof). The secret is echoed only in the answer to the request that set it.
import { z } from "zod";
import { viewFor } from "../auth/access-view.ts";
import type { TenantAdmin } from "../auth/authorize.ts";
import type { PrismaClient } from "../db/prisma.ts";
import { Prisma } from "../generated/prisma/client.ts";
import { ConflictError, NotFoundError, ValidationError } from "../errors.ts";
import { FORCE_DELETE_MARK } from "../events/outbox.ts";
import { isRefusedHost } from "../events/webhooks/addresses.ts";
import { remakePendingDeliveries } from "../events/webhooks/takeover.ts";
import { METADATA_DIMENSIONS, storableText } from "../metadata/data-types.ts";
import type { MetadataRegistry } from "../metadata/registry.ts";
import { METADATA_TABLES } from "../metadata/tables.ts";
import type { MetadataCode, Queryable } from "../types.ts";

export interface WebhookDeps {
  prisma: PrismaClient;
  metadata: MetadataRegistry;
  allowPrivate: boolean;
  /** Registrations one tenant may have (WEBHOOK_MAX_PER_TENANT). */
  maxPerTenant: number;
}

export const SECRET_MIN_LENGTH = 16;
const EVENT_NAME = /^([A-Za-z][A-Za-z0-9_]{0,29})(Created|Updated|Deleted)$/;
const MAX_DELIVERY_ROWS = 1000;
/** The first key of the advisory lock that serialises a tenant's registrations (the cap). */
const WEBHOOK_COUNT_LOCK = 0x5745_4248; // "WEBH"

export interface WebhookView {
  webhook_id: string;
  url: string;
  events: string[];
  dimensions: string[];
  filters: Record<string, unknown>;
  active: boolean;
  retry_count: number;
  timeout_ms: number;
  created_at: string;
  updated_at: string;
  secret?: string;
}

/** Text PostgreSQL can hold (no NUL character, no unpaired surrogate): else 400 naming the member. */
const text = () =>
  z
    .string()
    .refine(storableText, "contains a NUL character or an unpaired UTF-16 surrogate, which cannot be stored");
const scalar = z.union([text().max(500), z.number(), z.boolean(), z.null()]);
const fields = {
  url: text().min(1).max(500),
  events: z.array(text().max(100)).min(1).max(100),
  dimensions: z.array(text().max(30)).max(100).nullable(),
  secret: text().min(SECRET_MIN_LENGTH).max(100).nullable(),
  active: z.boolean(),
  filters: z.record(text().max(60), scalar).nullable(),
  retry_count: z.number().int().min(0).max(10),
  timeout_ms: z.number().int().min(100).max(30_000),
};
const createBody = z.strictObject({
  ...fields,
  dimensions: fields.dimensions.optional(),
  secret: fields.secret.optional(),
  active: fields.active.optional(),
  filters: fields.filters.optional(),
  retry_count: fields.retry_count.optional(),
  timeout_ms: fields.timeout_ms.optional(),
});
const patchBody = createBody.partial();
type CreateBody = z.infer<typeof createBody>;

function invalid(field: string, message: string): ValidationError {
  return new ValidationError("INVALID_FIELD", message, { field });
}

function parseBody<T>(schema: z.ZodType<T>, body: unknown): T {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new ValidationError("INVALID_BODY", "The body must be a JSON object.");
  }
  const parsed = schema.safeParse(body);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  const field = issue.code === "unrecognized_keys" ? String(issue.keys[0]) : String(issue.path[0] ?? "body");
  throw invalid(field.slice(0, 60), `${field.slice(0, 60)}: ${issue.message}`);
}

/** http/https, no credentials, and (unless allowed) no refused literal address or localhost name. */
function checkUrl(raw: string, allowPrivate: boolean): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw invalid("url", "url must be an absolute http or https URL.");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw invalid("url", "url must use http or https.");
  if (url.username || url.password) throw invalid("url", "url must not carry credentials.");
  if (!allowPrivate && isRefusedHost(url.hostname)) {
    throw invalid(
      "url",
      "url points at an address webhooks may not reach (localhost, or a private, loopback, link-local, documentation or other reserved range, also inside IPv6).",
    );
  }
  return url.toString();
}

/**
 * Event names and `dimensions` name dimensions or metadata tables (DIM, VAR, COST, OBJECT, MENU,
 * SORT, DOCUMENT: a metadata change's event is `<table code>Created`…, every one of them written
 * through the metadata endpoints); any other name could never fire.
 */
function checkNames(deps: WebhookDeps, body: Partial<CreateBody>): void {
  const dims = deps.metadata.current().dimensions;
  const known = (code: string) => dims.has(code) || METADATA_DIMENSIONS.has(code);
  for (const name of body.events ?? []) {
    if (name === "*") continue;
    const m = EVENT_NAME.exec(name);
    if (!m)
      throw invalid(
        "events",
        `${name.slice(0, 60)} is not an event name (<DIM>Created, Updated, Deleted, or *).`,
      );
    if (!known(m[1]!))
      throw invalid("events", `${name.slice(0, 60)} names an unknown dimension or metadata table.`);
  }
  for (const dim of body.dimensions ?? []) {
    if (!known(dim))
      throw invalid("dimensions", `${dim.slice(0, 60)} is not a dimension nor a metadata table.`);
  }
}

/**
 * Each filter must name a field of a dimension the registration can receive events of (its
 * `dimensions`, else those its event names name, else any): a filter on no such field could never
 * match, and the registration would never fire. The registrant (the caller: who registers or
 * changes a registration is its registrant) must also be able to read it, in list or detail (L or
 * D, at their peso), in every one of those dimensions they may read that has it: matching on a
 * field would disclose its value to them through which events arrive. Events of a dimension they
 * may not read never reach them, so a field only such dimensions have could never match either.
 * Metadata events are matched on their row's columns (COD_DIM, COD_VAR…): a filter may name a
 * column of a metadata table the registration can receive events of; anyone who learns of a
 * metadata change reads its whole row.
 */
function checkFilters(
  deps: WebhookDeps,
  caller: TenantAdmin,
  events: readonly string[],
  dimensions: readonly string[] | null,
  filters: Record<string, unknown> | null,
): void {
  // Events named only of dimensions `dimensions` leaves out: none could ever match.
  const named = events.includes("*") ? [] : events.map((e) => EVENT_NAME.exec(e)?.[1] ?? "");
  if (dimensions?.length && named.length && !named.some((code) => dimensions.includes(code)))
    throw invalid(
      "dimensions",
      `dimensions: ${dimensions.join(", ").slice(0, 120)} holds none of the events' dimensions (${[...new Set(named)].join(", ").slice(0, 120)}); such a registration would never fire.`,
    );
  if (!filters) return;
  const model = deps.metadata.current();
  const dims = model.dimensions;
  const codes = dimensions?.length
    ? dimensions
    : named.length
      ? named
      : [...dims.keys(), ...METADATA_DIMENSIONS];
  const covered = codes.map((code) => dims.get(code)).filter((d) => d !== undefined);
  const coveredTables = [...new Set(codes)]
    .filter((code) => METADATA_DIMENSIONS.has(code))
    .map((code) => METADATA_TABLES[code as MetadataCode]);
  const coveredNames = [...covered.map((d) => d.code), ...coveredTables.map((t) => t.code)];
  const view = viewFor(model, {
    grants: caller.grants,
    peso: caller.peso,
    centerDett: caller.centroDett,
    source: null,
  });
  const readable = covered.filter((d) => view.nodeFor(d.code, "read") !== null);
  for (const field of Object.keys(filters)) {
    const shown = field.slice(0, 60);
    // A force delete's payload carries "force": true (docs/events.md): a filter on it takes only
    // force deletes, unless a dimension has a field of that name (judged as any field then).
    if (field === FORCE_DELETE_MARK && !covered.some((d) => d.fieldsByCode.has(field))) continue;
    const ofTable = coveredTables.some((t) => t.columns.includes(field));
    if (!covered.some((d) => d.fieldsByCode.has(field)) && !ofTable)
      throw invalid(
        "filters",
        `filters: ${shown} is not a field of ${coveredNames.join(", ").slice(0, 200) || "any dimension"}; such a registration would never fire.`,
      );
    const having = readable.filter((d) => d.fieldsByCode.has(field));
    const hidden = having.filter((d) => {
      const rules = view.fields(d);
      const f = d.fieldsByCode.get(field)!;
      return !rules.allows(f, "L") && !rules.allows(f, "D");
    });
    if ((having.length === 0 && !ofTable) || hidden.length > 0)
      throw invalid(
        "filters",
        `filters: ${shown} is not a field you may read of ${(hidden.length ? hidden : covered).map((d) => d.code).join(", ")}; a webhook may match only on fields its registrant may read.`,
      );
  }
}

type Row = Awaited<ReturnType<PrismaClient["tbWebhook"]["findFirstOrThrow"]>>;

function view(row: Row, withSecret: boolean): WebhookView {
  const v: WebhookView = {
    webhook_id: String(row.WEBHOOK_ID),
    url: row.URL,
    events: row.EVENTS as string[],
    dimensions: (row.DIMENSIONS as string[] | null) ?? [],
    filters: (row.FILTERS as Record<string, unknown> | null) ?? {},
    active: row.ACTIVE === "Y",
    retry_count: row.RETRY_COUNT,
    timeout_ms: row.TIMEOUT_MS,
    created_at: row.CREATED_AT.toISOString(),
    updated_at: row.UPDATED_AT.toISOString(),
  };
  if (withSecret && row.SECRET) v.secret = row.SECRET;
  return v;
}

function parseId(id: string): number {
  if (!/^[1-9][0-9]{0,9}$/.test(id) || Number(id) > 2_147_483_647) {
    throw new NotFoundError("WEBHOOK_NOT_FOUND", "No such webhook.");
  }
  return Number(id);
}

async function own(deps: WebhookDeps, caller: TenantAdmin, id: string): Promise<Row> {
  const row = await deps.prisma.tbWebhook.findFirst({
    where: { WEBHOOK_ID: parseId(id), SOURCE: caller.tenantId },
  });
  if (!row) throw new NotFoundError("WEBHOOK_NOT_FOUND", `Webhook ${id.slice(0, 20)} does not exist.`);
  return row;
}

export async function createWebhook(
  deps: WebhookDeps,
  caller: TenantAdmin,
  input: unknown,
): Promise<WebhookView> {
  const body = parseBody(createBody, input);
  const url = checkUrl(body.url, deps.allowPrivate);
  checkNames(deps, body);
  checkFilters(deps, caller, body.events, body.dimensions ?? null, body.filters ?? null);
  // The count and the insert under one lock per tenant: two requests at once cannot both take the
  // last place.
  const row = await deps.prisma.$transaction(async (tx) => {
    await tx.$executeRaw`SELECT pg_advisory_xact_lock(${WEBHOOK_COUNT_LOCK}::int, hashtext(${caller.tenantId}))`;
    const registered = await tx.tbWebhook.count({ where: { SOURCE: caller.tenantId } });
    if (registered >= deps.maxPerTenant)
      throw new ConflictError(
        "WEBHOOK_LIMIT_REACHED",
        `This tenant has ${registered} webhooks, the most it may have (${deps.maxPerTenant}); delete one first.`,
      );
    return tx.tbWebhook.create({
      data: {
        SOURCE: caller.tenantId,
        // Deliveries follow this user's row scope (decisions.md §17).
        CREATED_BY: caller.userId,
        URL: url,
        EVENTS: body.events,
        DIMENSIONS: body.dimensions?.length ? body.dimensions : undefined,
        FILTERS: body.filters && Object.keys(body.filters).length ? body.filters : undefined,
        SECRET: body.secret ?? null,
        ACTIVE: body.active === false ? "N" : "Y",
        ...(body.retry_count !== undefined ? { RETRY_COUNT: body.retry_count } : {}),
        ...(body.timeout_ms !== undefined ? { TIMEOUT_MS: body.timeout_ms } : {}),
      },
    });
  });
  return view(row, true);
}

export async function listWebhooks(deps: WebhookDeps, caller: TenantAdmin): Promise<WebhookView[]> {
  const rows = await deps.prisma.tbWebhook.findMany({
    where: { SOURCE: caller.tenantId },
    orderBy: { WEBHOOK_ID: "asc" },
    take: 1000,
  });
  return rows.map((r) => view(r, false));
}

export async function getWebhook(deps: WebhookDeps, caller: TenantAdmin, id: string): Promise<WebhookView> {
  return view(await own(deps, caller, id), false);
}

export async function updateWebhook(
  deps: WebhookDeps,
  caller: TenantAdmin,
  id: string,
  input: unknown,
): Promise<WebhookView> {
  const body = parseBody(patchBody, input);
  const row = await own(deps, caller, id);
  const url = body.url === undefined ? undefined : checkUrl(body.url, deps.allowPrivate);
  checkNames(deps, body);
  // Judged on the registration as it will be: the body's members over the stored ones.
  checkFilters(
    deps,
    caller,
    body.events ?? (row.EVENTS as string[]),
    body.dimensions !== undefined ? body.dimensions : (row.DIMENSIONS as string[] | null),
    body.filters !== undefined ? body.filters : (row.FILTERS as Record<string, unknown> | null),
  );
  const nullable = (v: object | null | undefined): Prisma.InputJsonValue | null | undefined =>
    v === undefined
      ? undefined
      : v === null || Object.keys(v).length === 0
        ? null
        : (v as Prisma.InputJsonValue);
  const dimensions = nullable(body.dimensions);
  const filters = nullable(body.filters);
  const updated = await deps.prisma.$transaction(async (tx) => {
    // The registration locked first (as the dispatcher and a delete lock it before its
    // deliveries), its registrant read under the lock: another administrator's change takes it
    // over, and its pending deliveries, made for the earlier registrant, are made again for this
    // one in this transaction (takeover.ts).
    const [locked] = await tx.$queryRawUnsafe<Array<{ CREATED_BY: string | null }>>(
      `SELECT "CREATED_BY" FROM "TB_WEBHOOK" WHERE "WEBHOOK_ID" = $1 FOR UPDATE`,
      row.WEBHOOK_ID,
    );
    if (!locked) throw new NotFoundError("WEBHOOK_NOT_FOUND", `Webhook ${id.slice(0, 20)} does not exist.`);
    const takenOver = locked.CREATED_BY !== caller.userId;
    const changed = await tx.tbWebhook.update({
      where: { WEBHOOK_ID: row.WEBHOOK_ID },
      data: {
        ...(url !== undefined ? { URL: url } : {}),
        ...(body.events !== undefined ? { EVENTS: body.events } : {}),
        ...(dimensions !== undefined ? { DIMENSIONS: dimensions ?? Prisma.DbNull } : {}),
        ...(filters !== undefined ? { FILTERS: filters ?? Prisma.DbNull } : {}),
        ...(body.secret !== undefined ? { SECRET: body.secret } : {}),
        ...(body.active !== undefined ? { ACTIVE: body.active ? "Y" : "N" } : {}),
        ...(body.retry_count !== undefined ? { RETRY_COUNT: body.retry_count } : {}),
        ...(body.timeout_ms !== undefined ? { TIMEOUT_MS: body.timeout_ms } : {}),
        // Who changes a registration takes it over: its deliveries follow their row scope now.
        CREATED_BY: caller.userId,
        UPDATED_AT: new Date(),
      },
    });
    if (takenOver) {
      await remakePendingDeliveries(queryableOf(tx), deps.metadata.current(), {
        WEBHOOK_ID: changed.WEBHOOK_ID,
        EVENTS: changed.EVENTS as string[],
        DIMENSIONS: changed.DIMENSIONS as string[] | null,
        FILTERS: changed.FILTERS as Record<string, unknown> | null,
        SOURCE: changed.SOURCE,
        CREATED_BY: caller.userId,
        PESO: String(caller.peso),
        CENTRO_DETT: caller.centroDett,
        AMBIENTE: caller.ambiente,
        ACTIVE: true,
        GRANTS: caller.grants,
      });
    }
    return changed;
  });
  return view(updated, body.secret !== undefined);
}

/** Raw statements in a Prisma transaction, for the event side's code that sends SQL. */
function queryableOf(tx: {
  $queryRawUnsafe<T = unknown>(query: string, ...values: unknown[]): Prisma.PrismaPromise<T>;
}): Queryable {
  return {
    async query<R>(text: string, params: readonly unknown[] = []) {
      const rows = await tx.$queryRawUnsafe<R[]>(text, ...params);
      return { rows, rowCount: rows.length };
    },
  } as Queryable;
}

export async function deleteWebhook(
  deps: WebhookDeps,
  caller: TenantAdmin,
  id: string,
): Promise<{ message: string; webhook_id: string }> {
  const row = await own(deps, caller, id);
  // The registration first, then its deliveries: the order the dispatcher locks them in.
  await deps.prisma.$transaction([
    deps.prisma.tbWebhook.delete({ where: { WEBHOOK_ID: row.WEBHOOK_ID } }),
    deps.prisma.tbWebhookDelivery.updateMany({
      where: { WEBHOOK_ID: row.WEBHOOK_ID, STATUS: "pending" },
      data: { STATUS: "cancelled" },
    }),
  ]);
  return { message: "Webhook deleted", webhook_id: String(row.WEBHOOK_ID) };
}

export interface DeliveryLogRow {
  LOG_ID: number;
  WEBHOOK_ID: number;
  OUTBOX_ID: string;
  STATUS: string;
  HTTP_STATUS: number | null;
  ERROR_MESSAGE: string | null;
  ATTEMPT_COUNT: number;
  CREATED_AT: string;
}

/** The delivery log of one registration, newest first (at most `limit` rows, 1000 at most). */
export async function listDeliveries(
  deps: WebhookDeps,
  caller: TenantAdmin,
  id: string,
  limit = 100,
): Promise<DeliveryLogRow[]> {
  const row = await own(deps, caller, id);
  const rows = await deps.prisma.tbWebhookLog.findMany({
    where: { WEBHOOK_ID: row.WEBHOOK_ID },
    orderBy: { LOG_ID: "desc" },
    take: Math.min(Math.max(1, limit), MAX_DELIVERY_ROWS),
  });
  return rows.map((r) => ({
    LOG_ID: r.LOG_ID,
    WEBHOOK_ID: r.WEBHOOK_ID,
    OUTBOX_ID: String(r.OUTBOX_ID),
    STATUS: r.STATUS,
    HTTP_STATUS: r.HTTP_STATUS,
    ERROR_MESSAGE: r.ERROR_MESSAGE,
    ATTEMPT_COUNT: r.ATTEMPT_COUNT,
    CREATED_AT: r.CREATED_AT.toISOString(),
  }));
}
