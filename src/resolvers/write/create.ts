// Create, the first path of the write pipeline: field rules -> pre-insert templates -> types
// and lengths -> required fields -> foreign keys -> insert with audit fields -> insert
// cascades -> outbox row. Runs inside the caller's transaction (WriteContext.tx).
import { randomUUID } from "node:crypto";
import { fieldAllows, fieldKnown } from "../../auth/authorize.ts";
import { ident } from "../../db/sql.ts";
import { ApiError, BadRequestError, ConflictError, ValidationError } from "../../errors.ts";
import { insertOutboxEvent } from "../../events/outbox.ts";
import { fieldConfig } from "../../metadata/build.ts";
import { TENANT_COLUMN } from "../../metadata/data-types.ts";
import type { DimensionDef, FieldDef, Relation } from "../../types.ts";
import type { WriteContext } from "./context.ts";
import { renderTemplate } from "./templates.ts";
import { compactTimestamp, rowToRecord, toColumnValue } from "./values.ts";

export interface WriteResult {
  /** The stored record (every field, TENANT_ID left out). */
  record: Record<string, unknown>;
  recordId: string | number;
  eventId: string;
  /** Records created by insert cascades, in order. */
  children: WriteResult[];
}

function templateValue(field: FieldDef, text: string): unknown {
  switch (field.dataType) {
    case "INTEGER":
      return /^-?\d+$/.test(text) ? Number(text) : text;
    case "DECIMAL":
      return text.trim() !== "" && Number.isFinite(Number(text)) ? Number(text) : text;
    case "BOOLEAN":
      return text === "true" ? true : text === "false" ? false : text;
    case "JSON":
      try {
        return JSON.parse(text);
      } catch {
        return text;
      }
    default:
      return text;
  }
}

function isBlank(v: unknown): boolean {
  return v === undefined || v === null || v === "";
}

/** Checks the body's member names for a create: known fields, with N (unless trusted). */
export function checkCreateBody(w: WriteContext, dim: DimensionDef, body: Record<string, unknown>): void {
  for (const key of Object.keys(body)) {
    if (dim.insertCascade.includes(key)) continue;
    const field = dim.fieldsByCode.get(key);
    if (field?.system) continue; // audit fields and TREC are set by the system; ignored in bodies
    if (!field || (!w.trusted && !fieldKnown(w.ctx, field))) {
      throw new ValidationError("INVALID_FIELD", `${key} is not a field of ${dim.code}.`, { field: key });
    }
    if (!w.trusted && !fieldAllows(w.ctx, field, "N")) {
      throw new ApiFieldError("FIELD_NOT_ALLOWED_ON_CREATE", "FieldNotAllowedOnCreate", field.code, dim.code);
    }
    if (field.isId && dim.idType === "INTEGER") {
      throw new ApiFieldError("FIELD_NOT_ALLOWED_ON_CREATE", "FieldNotAllowedOnCreate", field.code, dim.code);
    }
  }
}

/** The field rules of spec 2.3: FieldNotAllowedOnCreate, FieldNotModifiable. */
export class ApiFieldError extends ApiError {
  constructor(
    code: "FIELD_NOT_ALLOWED_ON_CREATE" | "FIELD_NOT_MODIFIABLE",
    errorName: string,
    field: string,
    dim: string,
  ) {
    const verb = code === "FIELD_NOT_MODIFIABLE" ? "may not be modified" : "may not be sent on create";
    super(400, code, errorName, `${field} ${verb} in ${dim}.`, { field });
  }
}

/** Fails with INVALID_FOREIGN_KEY when an AC/VARS value has no live record in its destination. */
export async function checkForeignKeys(
  w: WriteContext,
  dim: DimensionDef,
  values: Record<string, unknown>,
  only?: ReadonlySet<string>,
): Promise<void> {
  for (const field of dim.fields) {
    if (!field.fkKind || isBlank(values[field.code])) continue;
    if (only && !only.has(field.code)) continue;
    const rel = dim.relations.find((r) => r.fromField === field.code);
    const target = rel ? w.model.dimensions.get(rel.toDim) : undefined;
    if (!rel || !target) continue;
    const res = await w.tx.query(
      `SELECT 1 FROM ${ident(target.tableName)} WHERE ${ident(TENANT_COLUMN)} = $1 AND ${ident(rel.toField)} = $2 AND "TREC" <> 'C' LIMIT 1`,
      [w.ctx.principal.tenantId, values[field.code]],
    );
    if (!res.rows.length) {
      throw new BadRequestError(
        "INVALID_FOREIGN_KEY",
        `${field.code}: ${JSON.stringify(values[field.code])} does not exist in ${target.code}.`,
        { field: field.code },
      );
    }
  }
}

export function mapDatabaseError(err: unknown, dim: DimensionDef): never {
  const code = (err as { code?: string })?.code;
  if (code === "23505") {
    throw new ConflictError(
      "DUPLICATE_KEY",
      `A ${dim.code} record with this ${dim.idField} exists already.`,
      {
        field: dim.idField,
      },
    );
  }
  if (code === "22001" || code === "22003" || code === "22P02" || code === "23502") {
    throw new ValidationError("INVALID_FIELD_VALUE", `A value does not fit its field in ${dim.code}.`);
  }
  throw err;
}

export async function createRecord(
  w: WriteContext,
  dim: DimensionDef,
  body: Record<string, unknown>,
  parentLink?: { relation: Relation; value: unknown },
): Promise<WriteResult> {
  checkCreateBody(w, dim, body);
  const values: Record<string, unknown> = {};
  for (const f of dim.fields) {
    if (!f.system && body[f.code] !== undefined) values[f.code] = body[f.code];
  }
  if (parentLink) values[parentLink.relation.fromField] = parentLink.value;

  // Pre-insert templates, in NUM_COST order, for fields absent or null in the body.
  const templated = dim.fields
    .filter((f) => !f.system && fieldConfig(f, w.ctx.centerDett).valueTemp)
    .sort(
      (a, b) =>
        (fieldConfig(a, w.ctx.centerDett).numCost ?? 0) - (fieldConfig(b, w.ctx.centerDett).numCost ?? 0),
    );
  for (const f of templated) {
    if (!isBlank(values[f.code])) continue;
    const text = await renderTemplate(fieldConfig(f, w.ctx.centerDett).valueTemp!, {
      tx: w.tx,
      ctx: w.ctx,
      now: w.now,
      record: values,
    });
    values[f.code] = templateValue(f, text);
  }
  const idField = dim.fieldsByCode.get(dim.idField)!;
  if (dim.idType === "STRING" && isBlank(values[dim.idField])) values[dim.idField] = randomUUID();

  // Types and lengths, then required fields.
  const columns: string[] = [];
  const params: unknown[] = [];
  for (const f of dim.fields) {
    if (f.system || !(f.code in values)) continue;
    columns.push(f.code);
    params.push(toColumnValue(f, values[f.code]));
  }
  for (const f of dim.fields) {
    if (f.system || (f === idField && dim.idType === "INTEGER")) continue;
    const required = fieldConfig(f, w.ctx.centerDett).required || !f.nullable;
    if (required && isBlank(values[f.code])) {
      throw new ValidationError("REQUIRED_FIELD_MISSING", `${f.code} is required.`, { field: f.code }, 422);
    }
  }
  await checkForeignKeys(w, dim, values);

  const stamp = compactTimestamp(w.now);
  const user = w.ctx.principal.userId;
  const audit: Array<[string, unknown]> =
    dim.auditStyle === "CREATED"
      ? [
          ["TREC", "N"],
          ["CREATED_BY", user],
          ["CREATED_AT", stamp],
        ]
      : [
          ["TREC", "N"],
          ["CDATA", stamp],
          ["OWNER", user],
        ];
  for (const [c, v] of audit) {
    columns.push(c);
    params.push(v);
  }
  columns.push(TENANT_COLUMN);
  params.push(w.ctx.principal.tenantId);

  const sql = `INSERT INTO ${ident(dim.tableName)} (${columns.map(ident).join(", ")}) VALUES (${params
    .map((_, i) => `$${i + 1}`)
    .join(", ")}) RETURNING *`;
  let row: Record<string, unknown>;
  try {
    row = (await w.tx.query<Record<string, unknown>>(sql, params)).rows[0]!;
  } catch (err) {
    mapDatabaseError(err, dim);
  }
  const record = rowToRecord(dim, row);
  const recordId = record[dim.idField] as string | number;
  const eventId = await insertOutboxEvent(w.tx, {
    dim: dim.code,
    kind: "Created",
    recordId,
    tenantId: w.ctx.principal.tenantId,
    payload: record,
  });

  // Insert cascade: child records under the child dimension's code, foreign key set.
  const children: WriteResult[] = [];
  for (const childCode of dim.insertCascade) {
    const list = body[childCode];
    if (list === undefined || list === null) continue;
    if (!Array.isArray(list)) {
      throw new ValidationError("INVALID_FIELD_VALUE", `${childCode} must be an array of records.`, {
        field: childCode,
      });
    }
    const child = w.model.dimensions.get(childCode)!;
    const relation = dim.reverseRelations.find((r) => r.fromDim === childCode);
    if (!relation) {
      throw new ValidationError("INVALID_FIELD", `${childCode} has no relation to ${dim.code}.`, {
        field: childCode,
      });
    }
    for (const [i, item] of list.entries()) {
      if (item === null || typeof item !== "object" || Array.isArray(item)) {
        throw new ValidationError("INVALID_FIELD_VALUE", `${childCode}[${i}] must be an object.`, {
          field: childCode,
        });
      }
      const childBody = { ...(item as Record<string, unknown>) };
      delete childBody[relation.fromField];
      children.push(await createRecord(w, child, childBody, { relation, value: record[relation.toField] }));
    }
  }
  return { record, recordId, eventId, children };
}
