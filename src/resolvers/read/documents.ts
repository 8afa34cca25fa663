// Documents (spec 4.6, decisions.md §14): a root record with related records embedded under each
// part's name. Every part goes through the read resolvers: the root is a getRecord, each part one
// listRecords (one statement), with the grants, tenant, TREC and field visibility of a read.
//
// A part's dimension is usually served by another menu node than the root's (a price list's
// prices): it is authorized through the request's source when that serves it, else through the
// nodes that serve the part's dimension the caller holds a read grant on; none is 403.
import { type AccessView, accessView } from "../../auth/access-view.ts";
import { authorizeRead } from "../../auth/authorize.ts";
import { ApiError, NotFoundError, ValidationError } from "../../errors.ts";
import { relatedRequest } from "../../query/access.ts";
import { invalidParameter } from "../../query/errors.ts";
import { emptyListQuery, emptyRecordQuery, type FilterExpr, type FilterLiteral } from "../../query/types.ts";
import { AUDIT_FIELDS } from "../../metadata/data-types.ts";
import { documentDefinitionSchema } from "../../metadata/document-definition.ts";
import { codecOf } from "../../metadata/codecs.ts";
import type { FieldDef, MetadataModel, RequestContext } from "../../types.ts";
import type { DataRecord } from "./common.ts";
import { createReadContext, type ReadDeps } from "./context.ts";
import { recordNotFound } from "../write/record-store.ts";
import { getRecord } from "./get.ts";
import { listRecords } from "./list.ts";

/** The most records one part embeds. */
export const MAX_PART_RECORDS = 1000;

export interface DocumentPart {
  name: string;
  dim: string;
  /** part field → root field */
  join: Record<string, string>;
  fields: string[] | null;
  /** Equality filters on the part: part field → value. */
  where: Record<string, FilterLiteral>;
}

export interface DocumentSpec {
  rootDim: string;
  /** The root record's id as the request gave it (a path segment, or a body's val_key). */
  key: string | number;
  rootFields: string[] | null;
  parts: DocumentPart[];
  compact: boolean;
}

/**
 * What `compact: true` leaves out: the audit fields of either AUDIT_STYLE, TREC among them
 * (decisions.md §2 counts it as one). No TB_VAR field may take these names (RESERVED_COLUMNS).
 */
const COMPACT_DROPS: ReadonlySet<string> = new Set(
  [...AUDIT_FIELDS.TREC, ...AUDIT_FIELDS.CREATED].map((f) => f.code),
);

/** The listed fields the caller may read in detail (all of them when none are listed). */
function readableFields(
  view: AccessView,
  model: MetadataModel,
  dim: string,
  listed: string[] | null,
): string[] {
  const def = model.dimensions.get(dim);
  if (!def) throw new NotFoundError("DIMENSION_NOT_FOUND", `Dimension ${dim.slice(0, 30)} does not exist.`);
  const detail = view
    .fields(def)
    .withFlag("D")
    .map((f) => f.code);
  if (!listed) return detail;
  for (const f of listed) {
    if (!def.fieldsByCode.has(f)) {
      throw new ValidationError("INVALID_FIELD", `${f.slice(0, 60)} is not a field of ${dim}.`, {
        field: f.slice(0, 60),
      });
    }
  }
  return listed.filter((f) => detail.includes(f));
}

function compacted(record: DataRecord): DataRecord {
  const out: DataRecord = {};
  for (const [k, v] of Object.entries(record)) if (v !== null && !COMPACT_DROPS.has(k)) out[k] = v;
  return out;
}

export async function buildDocument(
  deps: ReadDeps,
  request: RequestContext,
  spec: DocumentSpec,
): Promise<{ data: DataRecord }> {
  const model = deps.metadata.current();
  const rootRc = createReadContext(deps, request);
  const view = accessView(request, model);
  authorizeRead(request, model, spec.rootDim, view);
  const rootFields = readableFields(view, model, spec.rootDim, spec.rootFields);
  // The join keys are read even when not listed, then left out of the answer.
  const joinKeys = [...new Set(spec.parts.flatMap((p) => Object.values(p.join)))];
  const root = await getRecord(
    rootRc,
    spec.rootDim,
    String(spec.key),
    emptyRecordQuery({ fields: [...new Set([...rootFields, ...joinKeys])] }),
  ).catch((err: unknown) => {
    // An absent root is the RECORD_NOT_FOUND every other route answers (history, commands,
    // writes): one constructor, one shape, `details: {dimension, id}` included.
    if (err instanceof NotFoundError && err.code === "RECORD_NOT_FOUND")
      throw recordNotFound(model.dimensions.get(spec.rootDim)!, spec.key);
    throw err;
  });
  const data: DataRecord = {};
  for (const f of rootFields) data[f] = root.data[f] ?? null;

  await Promise.all(
    spec.parts.map(async (part) => {
      const partCtx = relatedRequest(request, model, part.dim, `document part ${part.name}`);
      const fields = readableFields(accessView(partCtx, model), model, part.dim, part.fields);
      const conditions: FilterExpr[] = [
        ...Object.entries(part.join).map(([partField, rootField]) => ({
          kind: "condition" as const,
          field: partField,
          op: "eq" as const,
          value: (root.data[rootField] ?? null) as FilterLiteral,
          origin: `document part ${part.name}`,
        })),
        ...Object.entries(part.where).map(([field, value]) => ({
          kind: "condition" as const,
          field,
          op: "eq" as const,
          value,
          origin: `document part ${part.name}`,
        })),
      ];
      const result = await listRecords(
        createReadContext(deps, partCtx),
        part.dim,
        emptyListQuery({
          filter: conditions.length === 1 ? conditions[0]! : { kind: "and", items: conditions },
          fields,
          // The part shows its detail (D) fields: the ones chosen above, and only those.
          forceListCost: fields,
          numRows: MAX_PART_RECORDS,
          withTotal: false,
        }),
      );
      data[part.name] = result.data;
    }),
  );
  if (!spec.compact) return { data };
  const out = compacted(data);
  for (const part of spec.parts) out[part.name] = (data[part.name] as DataRecord[]).map(compacted);
  return { data: out };
}

/**
 * 400 INVALID_PARAMETER naming the document's parameter `param` (the one the client sent, never
 * the part's field it filters, which the definition keeps to itself) when `value` is empty or not
 * a value of that field. An empty value filtered nothing (`item=` gave every line): a parameter
 * left out is no filter, one given must say what to filter on.
 */
function checkParameterValue(param: string, value: string, field: FieldDef | undefined): void {
  if (value === "") {
    throw invalidParameter(
      param,
      `${param} is empty: give the value to filter on, or leave ${param} out for no filter.`,
    );
  }
  // A field the definition names but the model lacks is the part's read to refuse (INVALID_FIELD).
  if (!field) return;
  try {
    codecOf(field.dataType).castFilter(field, value);
  } catch (err) {
    if (!(err instanceof ApiError) || err.field !== field.code) throw err;
    // The codec's message is "<FIELD>: <what is wrong>"; the client knows the parameter.
    const what = err.message.startsWith(`${field.code}: `)
      ? err.message.slice(field.code.length + 2)
      : err.message;
    throw invalidParameter(param, `${param}: ${what.replace(/\.$/, "")}.`);
  }
}

/** GET /api/v4/document/{name}/{key}: a TB_DOCUMENT definition with its query parameters. */
export async function getDocument(
  deps: ReadDeps,
  request: RequestContext,
  name: string,
  key: string,
  params: Record<string, string>,
  compact: boolean,
): Promise<{ data: DataRecord }> {
  const doc = deps.metadata.current().documents.get(name);
  if (!doc) throw new NotFoundError("DOCUMENT_NOT_FOUND", `No document ${name.slice(0, 60)}.`);
  const parsed = documentDefinitionSchema.safeParse(doc.definition);
  if (!parsed.success)
    throw new NotFoundError("DOCUMENT_NOT_FOUND", `Document ${name} has no usable definition.`);
  // A parameter no part defines filters nothing: left unread, the caller would believe it applied.
  const defined = new Set(parsed.data.parts.flatMap((p) => Object.keys(p.params ?? {})));
  for (const param of Object.keys(params)) {
    if (defined.has(param)) continue;
    const shown = param.slice(0, 60);
    throw invalidParameter(
      shown,
      defined.size
        ? `${shown} is not a parameter of document ${name}, which takes ${[...defined].join(", ")} (besides compact and the request's context, source among it).`
        : `${shown} is not a parameter of document ${name}, which takes none (besides compact and the request's context, source among it).`,
    );
  }
  const model = deps.metadata.current();
  return buildDocument(deps, request, {
    rootDim: doc.rootDim,
    key,
    rootFields: parsed.data.fields ?? null,
    compact,
    parts: parsed.data.parts.map((p) => {
      const where: Record<string, FilterLiteral> = {};
      for (const [param, field] of Object.entries(p.params ?? {})) {
        const v = params[param];
        if (v === undefined) continue;
        checkParameterValue(param, v, model.dimensions.get(p.dim)?.fieldsByCode.get(field));
        where[field] = v;
      }
      return { name: p.name, dim: p.dim, join: p.join, fields: p.fields ?? null, where };
    }),
  });
}

/** The members of an on-the-fly document's body, each with what it takes (its messages say so). */
const ON_THE_FLY_MEMBERS = {
  dim: "the root dimension's code, a string of 1 to 30 characters",
  val_key: "the root record's id, a string of 1 to 100 characters or a number",
  related_dim:
    'an object mapping each related dimension\'s code (up to 30 characters) to an array of at most 200 of its field codes (up to 60 characters each; [] for every field you may read in detail), e.g. {"ADDR": ["STREET"]}',
  compact: "true or false",
} as const;

type OnTheFlyMember = keyof typeof ON_THE_FLY_MEMBERS;

interface OnTheFlyBody {
  dim: string;
  val_key: string | number;
  related_dim: Record<string, string[]>;
  compact: boolean;
}

function shownValue(value: unknown): string {
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 40 ? `${text.slice(0, 40)}…` : text;
}

function wrongMember(member: OnTheFlyMember, value: unknown, at: string = member): never {
  throw new ValidationError(
    "INVALID_FIELD",
    `${at} must be ${ON_THE_FLY_MEMBERS[member]}; got ${shownValue(value)}.`,
    { field: at },
  );
}

const isString = (v: unknown, max: number): v is string =>
  typeof v === "string" && v.length >= 1 && v.length <= max;

/**
 * The body of POST /api/v4/document: `{dim, val_key, related_dim?, compact?}`. Not a JSON object:
 * 400 INVALID_REQUEST; a member it does not take: 400 INVALID_FIELD naming it; `dim` or `val_key`
 * absent: 400 MISSING_PARAMETER naming it; a member of the wrong type or size: 400 INVALID_FIELD
 * naming it and what it takes.
 */
function parseOnTheFlyBody(body: unknown): OnTheFlyBody {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new ValidationError(
      "INVALID_REQUEST",
      "The request body must be a JSON object: {dim, val_key, related_dim?, compact?}.",
    );
  }
  const given = body as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (Object.hasOwn(ON_THE_FLY_MEMBERS, key)) continue;
    const name = key.slice(0, 60);
    const where = name === "source" || name === "center_dett" ? ` (give ${name} in the query string)` : "";
    throw new ValidationError(
      "INVALID_FIELD",
      `${name} is not a member of a document request, which takes dim, val_key, related_dim and compact${where}.`,
      { field: name },
    );
  }
  const missing = (["dim", "val_key"] as const).filter((m) => given[m] === undefined);
  if (missing.length) {
    const what = missing.map((m) => `${m} (${ON_THE_FLY_MEMBERS[m]})`).join(" and ");
    throw new ValidationError("MISSING_PARAMETER", `The body must carry ${what}.`, {
      field: missing[0]!,
    });
  }
  const { dim, val_key, related_dim, compact } = given;
  if (!isString(dim, 30)) wrongMember("dim", dim);
  if (!isString(val_key, 100) && !(typeof val_key === "number" && Number.isFinite(val_key)))
    wrongMember("val_key", val_key);
  const related: Record<string, string[]> = {};
  if (related_dim !== undefined) {
    if (related_dim === null || typeof related_dim !== "object" || Array.isArray(related_dim))
      wrongMember("related_dim", related_dim);
    for (const [code, fields] of Object.entries(related_dim as Record<string, unknown>)) {
      if (code.length > 30) wrongMember("related_dim", code, "related_dim");
      const at = `related_dim.${code}`;
      if (!Array.isArray(fields) || fields.length > 200 || !fields.every((f) => isString(f, 60)))
        wrongMember("related_dim", fields, at);
      related[code] = fields as string[];
    }
  }
  if (compact !== undefined && typeof compact !== "boolean") wrongMember("compact", compact);
  return { dim, val_key: val_key as string | number, related_dim: related, compact: compact === true };
}

/** POST /api/v4/document: a document defined in the request, parts joined through TB_OBJECT. */
export async function getOnTheFlyDocument(
  deps: ReadDeps,
  request: RequestContext,
  body: unknown,
): Promise<{ data: DataRecord }> {
  const { dim: rootDim, val_key, related_dim, compact } = parseOnTheFlyBody(body);
  const model = deps.metadata.current();
  const root = model.dimensions.get(rootDim);
  if (!root) throw new NotFoundError("DIMENSION_NOT_FOUND", `Dimension ${rootDim} does not exist.`);
  const parts: DocumentPart[] = Object.entries(related_dim).map(([code, fields]) => {
    // The related dimension points at the root (reverse), or the root points at it (forward).
    const reverse = root.reverseRelations.find((r) => r.fromDim === code);
    const forward = root.relations.find((r) => r.toDim === code);
    const join = reverse
      ? { [reverse.fromField]: reverse.toField }
      : forward
        ? { [forward.toField]: forward.fromField }
        : null;
    if (!join) {
      throw new ValidationError(
        "INVALID_FIELD",
        `${code.slice(0, 30)} is not related to ${rootDim} (TB_OBJECT).`,
        {
          field: "related_dim",
        },
      );
    }
    return { name: code, dim: code, join, fields: fields.length ? fields : null, where: {} };
  });
  return buildDocument(deps, request, { rootDim, key: val_key, rootFields: null, parts, compact });
}
