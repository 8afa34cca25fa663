// Database errors a write can meet with valid SQL, mapped to typed API errors. (After such an
// error the transaction or savepoint is aborted: the caller only rethrows.)
import { ConflictError, ValidationError } from "../../errors.ts";
import type { DimensionDef } from "../../types.ts";

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
  // Class 22 (data exception: too long, out of range, bad JSON escape…) and NOT NULL: bad input.
  if (code?.startsWith("22") || code === "23502") {
    throw new ValidationError("INVALID_FIELD_VALUE", `A value does not fit its field in ${dim.code}.`);
  }
  throw err;
}
