// The audit columns a change sets, per AUDIT_STYLE (decisions.md §2): always by the system.
import type { AuditStyle } from "../../types.ts";
import type { Trec } from "./state.ts";
import { compactTimestamp } from "./values.ts";

export type AuditEvent = "create" | "update" | "soft_delete" | "restore";

/** Column → value pairs for the change; TREC included. */
export function auditColumns(
  style: AuditStyle,
  event: AuditEvent,
  user: string,
  now: Date,
  trec: Trec,
): Array<[string, unknown]> {
  const stamp = compactTimestamp(now);
  if (style === "TREC") {
    if (event === "create")
      return [
        ["TREC", trec],
        ["CDATA", stamp],
        ["OWNER", user],
      ];
    return [
      ["TREC", trec],
      ["LDATA", stamp],
      ["LOWNER", user],
    ];
  }
  switch (event) {
    case "create":
      return [
        ["TREC", trec],
        ["CREATED_BY", user],
        ["CREATED_AT", stamp],
      ];
    case "update":
      return [
        ["TREC", trec],
        ["UPDATED_BY", user],
        ["UPDATED_AT", stamp],
      ];
    case "soft_delete":
      return [
        ["TREC", trec],
        ["UPDATED_BY", user],
        ["UPDATED_AT", stamp],
        ["DELETED_BY", user],
        ["DELETED_AT", stamp],
      ];
    case "restore":
      return [
        ["TREC", trec],
        ["UPDATED_BY", user],
        ["UPDATED_AT", stamp],
        ["DELETED_BY", null],
        ["DELETED_AT", null],
      ];
  }
}
