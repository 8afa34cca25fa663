// The errors of the read query language (decisions.md §10), built in one place so that every
// adapter reports the same code, error type and members.
import { ApiError, BadRequestError, ValidationError } from "../errors.ts";

export function invalidFilter(
  message: string,
  where: string,
  details?: { token?: string; position?: number; expected?: string },
): ApiError {
  return new BadRequestError("INVALID_FILTER", message, {
    field: where,
    errors: [{ field: where, message }],
    ...(details ? { details } : {}),
  });
}

export function filterTooComplex(message: string, details: Record<string, unknown>): ApiError {
  return new BadRequestError("FILTER_TOO_COMPLEX", message, { details });
}

export function invalidParameter(parameter: string, message: string): ApiError {
  return new BadRequestError("INVALID_PARAMETER", message, { field: parameter });
}

/** A field that does not exist, or that the caller's peso hides (which behaves the same). */
export function unknownField(name: string, dim: string): ApiError {
  return new ValidationError("INVALID_FIELD", `${name} is not a field of ${dim}.`, { field: name });
}

export function fieldNotSearchable(name: string, dim: string): ApiError {
  return new ApiError(
    400,
    "FIELD_NOT_SEARCHABLE",
    "FieldNotSearchable",
    `${name} of ${dim} is not searchable.`,
    {
      field: name,
    },
  );
}

export function fieldNotReadable(name: string, dim: string): ApiError {
  return new ApiError(
    400,
    "FIELD_NOT_READABLE",
    "FieldNotReadable",
    `${name} of ${dim} may not be read in lists.`,
    {
      field: name,
    },
  );
}

export function invalidFieldValue(field: string, message: string): ApiError {
  return new ValidationError("INVALID_FIELD_VALUE", `${field}: ${message}`, { field });
}

/** A GraphQL `after` cursor that this list, sort, filter and caller did not issue, or a forged one. */
export function invalidCursor(message: string): ApiError {
  return new BadRequestError("INVALID_CURSOR", message, { field: "after" });
}
