// The TREC state machine of spec 3.1 with decisions.md §4. Pure functions: each returns the next
// state or throws 400 INVALID_STATE_TRANSITION.
import { ValidationError } from "../../errors.ts";

export type Trec = "N" | "M" | "C" | "P";
const STATES: readonly string[] = ["N", "M", "C", "P"];

function refuse(from: string, to: string, why: string, subject?: string): never {
  const prefix = subject ? `${subject}: ` : "";
  throw new ValidationError(
    "INVALID_STATE_TRANSITION",
    `${prefix}TREC cannot move from ${from} to ${to}: ${why}.`,
    { field: "TREC", details: { from, to, ...(subject ? { record: subject } : {}) } },
  );
}

function asTrec(value: unknown): Trec {
  if (typeof value !== "string" || !STATES.includes(value)) {
    throw new ValidationError("INVALID_FIELD_VALUE", "TREC must be one of N, M, C, P.", { field: "TREC" });
  }
  return value as Trec;
}

/**
 * The state after a PUT or PATCH of a record in state `from`. `requested` is data.TREC (undefined
 * when the body has none). Honoured: N/M → P and C → M (restore) on PATCH; a TREC equal to the
 * normal outcome (M) is accepted; anything else is refused.
 */
export function updateTransition(from: Trec, mode: "put" | "patch", requested: unknown): Trec {
  const to = requested === undefined ? undefined : asTrec(requested);
  if (from === "C") {
    if (mode === "patch" && to === "M") return "M";
    return refuse(from, to ?? "M", "a cancelled record can only be restored, by PATCH with TREC M");
  }
  if (to === undefined || to === "M") return "M";
  if (to === "P" && mode === "patch" && (from === "N" || from === "M")) return "P";
  if (to === "N") return refuse(from, to, "no record moves back to N");
  if (to === "C") return refuse(from, to, "cancel a record with DELETE");
  return refuse(
    from,
    to,
    mode === "put" ? "PUT does not move TREC" : "only N and M records enter processing",
  );
}

/** A command's precondition: the record is in one of `allowed` (else 400 INVALID_STATE_TRANSITION). */
export function requireState(from: Trec, allowed: readonly Trec[], to: unknown): void {
  if (!allowed.includes(from)) {
    refuse(
      from,
      typeof to === "string" ? to : "?",
      `this command applies to records in ${allowed.join(" or ")}`,
    );
  }
}

/**
 * The state check of a delete: soft from N or M (to C); force from N, M or C (removed).
 * `subject` names the record in the message (cascades: "ADDR 7").
 */
export function checkDeletable(from: Trec, force: boolean, subject?: string): void {
  const inProcessing = "a record in processing must be completed (PATCH) first";
  if (force) {
    if (from === "P") refuse(from, "removed", inProcessing, subject);
    return;
  }
  if (from === "C") refuse(from, "C", "the record is already cancelled", subject);
  if (from === "P") refuse(from, "C", inProcessing, subject);
}

export function currentTrec(record: Record<string, unknown>): Trec {
  const v = record.TREC;
  return typeof v === "string" && STATES.includes(v) ? (v as Trec) : "N";
}
