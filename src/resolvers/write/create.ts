// Create: pre-insert templates -> field rules -> types and lengths -> required fields -> foreign
// keys -> insert with audit fields -> outbox row -> insert cascade (child records in the body).
// Runs inside the caller's transaction (WriteContext.tx); the importer calls it with trusted: true.
import { randomUUID } from "node:crypto";
import { ApiError, ValidationError } from "../../errors.ts";
import { fieldConfig } from "../../metadata/build.ts";
import type { DimensionDef, FieldDef, Relation, WriteResult } from "../../types.ts";
import { auditColumns } from "./audit.ts";
import { requireWrittenInScope, scopeColumns, writeRowScope } from "./row-scope.ts";
import {
  createdEventBytesBound,
  type HeldEventBytes,
  recordChanged,
  reserveEventBytes,
} from "./change-event.ts";
import { OUTBOX_CHANNEL } from "../../events/outbox.ts";
import { codecOf } from "../../metadata/codecs.ts";
import { step, type WriteContext } from "./context.ts";
import { checkCreateBody, createCaller } from "./field-rules.ts";
import { foreignKeyLookups, type KeyLookup } from "./foreign-keys.ts";
import { checkMediaValues } from "./media-values.ts";
import { insertRow, insertRowWithEvent, keysCheckedInStatement, recordExists } from "./record-store.ts";
import { CounterValue, renderParts, renderTemplate, templateParts } from "./templates.ts";
import {
  bodyValue,
  checkAddressableId,
  checkFieldRules,
  checkRequired,
  fieldValues,
  isBlank,
  toColumnValue,
} from "./values.ts";

/** A template's text as a value of the field's type (the types step then checks it). */
function templateValue(field: FieldDef, text: string): unknown {
  return codecOf(field.dataType).fromTemplate(text);
}

/**
 * Whether a template's `{seq}` counter can be drawn by the INSERT (a CounterValue): a STRING field
 * that is neither the id (whose value is checked for collisions first) nor a foreign key, one
 * counter in its template, a counter no other template of the dimension draws (so the order in
 * which fields draw numbers stays NUM_COST's), and no template that reads the field's value.
 */
function counterInInsert(
  f: FieldDef,
  parts: ReturnType<typeof templateParts>,
  templates: readonly string[],
): boolean {
  if (f.isId || f.fkKind || f.dataType !== "STRING") return false;
  const counters = parts.filter((p) => p.kind === "seq");
  if (counters.length !== 1) return false;
  const name = (counters[0] as { name: string }).name;
  let drawn = 0;
  for (const t of templates) {
    for (const p of templateParts(t)) {
      if (p.kind === "seq" && p.name === name) drawn++;
      if (p.kind === "field" && p.field === f.code) return false;
    }
  }
  return drawn === 1;
}

/** Fills fields absent or null in the body from their VALUE_TEMP, in NUM_COST order. */
async function applyTemplates(w: WriteContext, dim: DimensionDef, values: Record<string, unknown>) {
  const config = (f: FieldDef) => fieldConfig(f, w.ctx.centerDett);
  const templated = dim.fields
    .filter((f) => !f.system && config(f).valueTemp)
    .sort((a, b) => (config(a).numCost ?? 0) - (config(b).numCost ?? 0));
  const templates = templated.map((f) => config(f).valueTemp!);
  for (const f of templated) {
    if (!isBlank(values[f.code])) continue;
    const parts = templateParts(config(f).valueTemp!);
    if (counterInInsert(f, parts, templates)) {
      const at = parts.findIndex((p) => p.kind === "seq");
      const counter = parts[at] as { name: string; width: number | null };
      const scope = { tx: w.tx, ctx: w.ctx, now: w.now, record: values };
      values[f.code] = new CounterValue(
        await renderParts(parts.slice(0, at), scope),
        counter.name,
        counter.width,
        await renderParts(parts.slice(at + 1), scope),
      );
      continue;
    }
    const render = async () =>
      templateValue(
        f,
        await renderTemplate(config(f).valueTemp!, { tx: w.tx, ctx: w.ctx, now: w.now, record: values }),
      );
    values[f.code] = f.isId ? await freeTemplatedId(w, dim, render) : await render();
  }
}

/** How many values a templated id draws before it leaves a taken one to the insert (409). */
const MAX_ID_DRAWS = 1000;

/**
 * A templated id that no record of the tenant holds yet: a client may have given a record the
 * value a {seq} is about to produce, so the template is drawn again (up to MAX_ID_DRAWS times,
 * and only while it yields new values) instead of failing on that value forever.
 */
async function freeTemplatedId(
  w: WriteContext,
  dim: DimensionDef,
  render: () => Promise<unknown>,
): Promise<unknown> {
  let value = await render();
  for (let draw = 1; draw < MAX_ID_DRAWS && (await recordExists(w, dim, value)); draw++) {
    const next = await render();
    if (next === value) break;
    value = next;
  }
  return value;
}

/**
 * Whether the id field is required in this context (TB_COST.REQUIRED): then a body without it is
 * a 422 from the required step, not an id the system makes up (decisions.md §3).
 */
function idRequired(w: WriteContext, dim: DimensionDef): boolean {
  const field = dim.fieldsByCode.get(dim.idField);
  return field !== undefined && fieldConfig(field, w.ctx.centerDett).required;
}

/**
 * The error of an insert-cascade child with the fields it names given as paths from the parent's
 * body (`ORDL[1].QTY`, deeper children `ORDL[1].X[0].F`), so a client can tell which line failed.
 * An error naming no field (a request bound, the database gone) is passed on as it is.
 */
function atChild(err: ApiError, place: string): ApiError {
  if (err.field === undefined && !err.errors?.length) return err;
  const at = (field: string) => `${place}.${field}`;
  const moved = new ApiError(err.status, err.code, err.errorType, err.message, {
    ...(err.field !== undefined ? { field: at(err.field) } : {}),
    ...(err.errors !== undefined ? { errors: err.errors.map((e) => ({ ...e, field: at(e.field) })) } : {}),
    ...(err.details !== undefined ? { details: err.details } : {}),
    ...(err.extra !== undefined ? { extra: err.extra } : {}),
    ...(err.headers !== undefined ? { headers: err.headers } : {}),
    cause: err,
  });
  // Still the error's own class (ValidationError, ConflictError…) for whoever tells them apart.
  return Object.setPrototypeOf(moved, Object.getPrototypeOf(err)) as ApiError;
}

function childLists(dim: DimensionDef, body: Record<string, unknown>) {
  const lists: Array<{ code: string; items: Record<string, unknown>[] }> = [];
  for (const code of dim.insertCascade) {
    const list = bodyValue(body, code);
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) {
      throw new ValidationError("INVALID_FIELD_VALUE", `${code} must be an array of records.`, {
        field: code,
      });
    }
    list.forEach((item, i) => {
      if (item === null || typeof item !== "object" || Array.isArray(item)) {
        throw new ValidationError("INVALID_FIELD_VALUE", `${code}[${i}] must be an object.`, {
          field: `${code}[${i}]`,
        });
      }
    });
    lists.push({ code, items: list as Record<string, unknown>[] });
  }
  return lists;
}

/**
 * The create of a record that is its transaction's only change (no children, no parent): the
 * record and its Created event in one statement, the transaction's last (insertRowWithEvent), so
 * that a create that sent nothing before is one statement outside BEGIN and COMMIT: one round
 * trip. Its remaining steps come before that statement, which commits it.
 */
async function createAlone(
  w: WriteContext,
  dim: DimensionDef,
  columns: Array<[string, unknown]>,
  lookups: readonly KeyLookup[],
  eventBytes: HeldEventBytes,
): Promise<WriteResult> {
  let written: Awaited<ReturnType<typeof insertRowWithEvent>>;
  try {
    await step(w, "outbox");
    await step(w, "cascades");
    await step(w, "commit");
    w.committed = true;
    written = await insertRowWithEvent(w, dim, columns, lookups, OUTBOX_CHANNEL);
  } catch (err) {
    eventBytes.release();
    throw err;
  }
  const { record, eventId } = written;
  eventBytes.settle(record);
  const recordId = record[dim.idField] as string | number;
  return {
    dim: dim.code,
    action: "created",
    recordId,
    record,
    eventId,
    force: false,
    children: [],
    cascaded: [],
  };
}

export async function createRecord(
  w: WriteContext,
  dim: DimensionDef,
  body: Record<string, unknown>,
  parentLink?: { relation: Relation; value: unknown },
): Promise<WriteResult> {
  const values = fieldValues();
  for (const f of dim.fields) {
    const value = f.system ? undefined : bodyValue(body, f.code);
    if (value !== undefined) values[f.code] = value;
  }
  if (parentLink) values[parentLink.relation.fromField] = parentLink.value;

  await step(w, "templates");
  await applyTemplates(w, dim, values);

  await step(w, "field_rules");
  checkCreateBody(w, dim, body);
  const children = childLists(dim, body);
  if (dim.idType === "STRING" && isBlank(values[dim.idField]) && !idRequired(w, dim)) {
    values[dim.idField] = randomUUID();
  }
  checkAddressableId(dim, values[dim.idField]);

  await step(w, "types");
  checkMediaValues(w, dim, dim.fields, values);
  const columns: Array<[string, unknown]> = [];
  for (const f of dim.fields) {
    if (!f.system && Object.hasOwn(values, f.code)) {
      const value = values[f.code];
      if (value instanceof CounterValue) {
        // Its shortest text must fit; a counter grown past the field is refused by the INSERT.
        toColumnValue(f, value.shortest(), w.limits.fieldMaxBytes);
        columns.push([f.code, value]);
      } else columns.push([f.code, toColumnValue(f, value, w.limits.fieldMaxBytes)]);
    }
  }
  checkFieldRules(dim, dim.fields, values, w.ctx.centerDett);

  await step(w, "required");
  checkRequired(
    dim,
    dim.fields.filter((f) => !f.system && !(f.isId && dim.idType === "INTEGER")),
    values,
    w.ctx.centerDett,
    createCaller(w, dim),
  );

  await step(w, "foreign_keys");
  // Looked up by the insert itself (one statement); a value the key cannot hold is refused here.
  const lookups = foreignKeyLookups(w, dim, values);

  await step(w, "record");
  columns.push(...auditColumns(dim.auditStyle, "create", w.ctx.principal.userId, w.now, "N"));
  columns.push(...scopeColumns(w, dim, body));
  // A scoped write checks its row after the insert (ROW_NOT_ALLOWED): not the one-statement path.
  const scoped = writeRowScope(w, dim) !== null;
  // Its event's largest possible size held of the request's budget (settled to the exact size once
  // written); when it would not fit, the general path spends the exact size (or refuses it, 413).
  const eventBytes =
    !scoped &&
    w.soleRecord &&
    !parentLink &&
    children.length === 0 &&
    w.tx.lastStatement &&
    keysCheckedInStatement(lookups)
      ? reserveEventBytes(w.limits, createdEventBytesBound(dim, columns))
      : null;
  if (eventBytes) return createAlone(w, dim, columns, lookups, eventBytes);
  const record = await insertRow(w, dim, columns, lookups);
  if (scoped) await requireWrittenInScope(w, dim, record[dim.idField]);
  const change = await recordChanged(w, dim, "created", record, false, { operation: "create", before: null });

  await step(w, "cascades");
  const created: WriteResult[] = [];
  for (const { code, items } of children) {
    const child = w.model.dimensions.get(code)!;
    const relation = dim.reverseRelations.find((r) => r.fromDim === code);
    if (!relation) {
      throw new ValidationError("INVALID_FIELD", `${code} has no relation to ${dim.code}.`, { field: code });
    }
    for (const [i, item] of items.entries()) {
      const childBody = { ...item };
      delete childBody[relation.fromField];
      try {
        created.push(await createRecord(w, child, childBody, { relation, value: record[relation.toField] }));
      } catch (err) {
        throw err instanceof ApiError ? atChild(err, `${code}[${i}]`) : err;
      }
    }
  }
  // The change itself (not a copy): its eventId arrives with the deferred outbox row.
  return Object.assign(change, { children: created, cascaded: [] });
}
