// The field rules of spec 2.3 for write bodies: unknown fields (INVALID_FIELD), fields without N
// on create (FieldNotAllowedOnCreate), fields without M on update (FieldNotModifiable); a field
// hidden by peso counts as one without the flag. The flags are the caller's access view's.
// Audit fields and TREC are the system's: ignored here (TREC moves are decided in state.ts).
import { accessView } from "../../auth/access-view.ts";
import { ApiError, ValidationError } from "../../errors.ts";
import type { DimensionDef, FieldDef, Flag } from "../../types.ts";
import type { WriteContext } from "./context.ts";

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

function unknownField(dim: DimensionDef, key: string): never {
  throw new ValidationError("INVALID_FIELD", `${key} is not a field of ${dim.code}.`, { field: key });
}

/**
 * The field of the dimension a body member names, or INVALID_FIELD. Unlike a read, a field hidden
 * by peso is known here: it behaves as if its flag were absent (decisions.md §6).
 */
function dimensionFieldNamed(dim: DimensionDef, key: string): FieldDef {
  const field = dim.fieldsByCode.get(key);
  if (!field) unknownField(dim, key);
  return field;
}

/** Whether the body may carry `flag` fields of `dim`: always when trusted, else the caller's view. */
function flagRule(w: WriteContext, dim: DimensionDef, flag: Flag): (field: FieldDef) => boolean {
  if (w.trusted) return () => true;
  const rules = accessView(w.ctx, w.model).fields(dim);
  return (field) => rules.allows(field, flag);
}

/**
 * What a create's required check asks of its caller (values.ts checkRequired): the fields it may
 * know (peso) and send (N); undefined when trusted (every field).
 */
export function createCaller(
  w: WriteContext,
  dim: DimensionDef,
): { knows(field: FieldDef): boolean; sends(field: FieldDef): boolean } | undefined {
  if (w.trusted) return undefined;
  const rules = accessView(w.ctx, w.model).fields(dim);
  return {
    knows: (field) => rules.isVisible(field),
    sends: (field) => (field.isId && dim.idType === "INTEGER") || rules.allows(field, "N"),
  };
}

/** Checks a create body's member names: known fields with N (unless trusted), child lists. */
export function checkCreateBody(w: WriteContext, dim: DimensionDef, body: Record<string, unknown>): void {
  const creatable = flagRule(w, dim, "N");
  for (const key of Object.keys(body)) {
    if (dim.insertCascade.includes(key)) continue;
    const field = dimensionFieldNamed(dim, key);
    if (field.system) continue;
    const notAllowed = (field.isId && dim.idType === "INTEGER") || !creatable(field);
    if (notAllowed) {
      throw new ApiFieldError("FIELD_NOT_ALLOWED_ON_CREATE", "FieldNotAllowedOnCreate", field.code, dim.code);
    }
  }
}

/**
 * Checks an update body's member names and returns the fields it changes. The id field may be
 * echoed with the record's own id; a different id is a key change and needs M like any field.
 */
export function checkUpdateBody(
  w: WriteContext,
  dim: DimensionDef,
  body: Record<string, unknown>,
  currentId: string | number,
): FieldDef[] {
  const changed: FieldDef[] = [];
  const modifiableField = flagRule(w, dim, "M");
  for (const [key, value] of Object.entries(body)) {
    const field = dimensionFieldNamed(dim, key);
    if (field.system) continue;
    if (field.isId && value !== null && String(value) === String(currentId)) continue;
    const modifiable = !(field.isId && dim.idType === "INTEGER") && modifiableField(field);
    if (!modifiable) {
      throw new ApiFieldError("FIELD_NOT_MODIFIABLE", "FieldNotModifiable", field.code, dim.code);
    }
    changed.push(field);
  }
  return changed;
}

/** The fields a PUT clears when its body leaves them out: every M field of the caller but the id. */
export function putClearedFields(
  w: WriteContext,
  dim: DimensionDef,
  body: Record<string, unknown>,
): FieldDef[] {
  const modifiable = flagRule(w, dim, "M");
  return dim.fields.filter((f) => !f.system && !f.isId && !Object.hasOwn(body, f.code) && modifiable(f));
}
