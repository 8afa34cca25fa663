// Evaluates pre-insert templates (TB_COST.VALUE_TEMP, decisions.md §4).
import { randomUUID } from "node:crypto";
import { parseTemplate, type TemplatePart } from "../../metadata/template.ts";
import type { Queryable, RequestContext } from "../../types.ts";
import { exceedsDepth } from "../../json-depth.ts";
import { compactTimestamp } from "./values.ts";

const parsedCache = new Map<string, TemplatePart[]>();

export function templateParts(template: string): TemplatePart[] {
  let p = parsedCache.get(template);
  if (!p) {
    p = parseTemplate(template);
    if (parsedCache.size > 1000) parsedCache.clear();
    parsedCache.set(template, p);
  }
  return p;
}

/**
 * The next value of a per-tenant counter. The row stays locked until the transaction ends, so
 * concurrent writers queue, and a rollback gives the number back: no duplicates, no gaps.
 */
export async function nextSequenceValue(tx: Queryable, tenantId: string, name: string): Promise<number> {
  const res = await tx.query<{ VALUE: number }>(
    `INSERT INTO "TB_SEQUENCE" ("TENANT_ID", "SEQ_NAME", "VALUE") VALUES ($1, $2, 1)
     ON CONFLICT ("TENANT_ID", "SEQ_NAME") DO UPDATE SET "VALUE" = "TB_SEQUENCE"."VALUE" + 1
     RETURNING "VALUE"`,
    [tenantId, name],
  );
  return Number(res.rows[0]!.VALUE);
}

export interface TemplateScope {
  tx: Queryable;
  ctx: RequestContext;
  now: Date;
  /** Values of the record being built (for {field:X}). */
  record: Record<string, unknown>;
}

/**
 * Another field's value as template text. A value nested too deep renders as "" (its own field
 * refuses it in the types step, so the write fails anyway) instead of overflowing JSON.stringify.
 */
function fieldText(v: unknown): string {
  if (v === null || v === undefined) return "";
  if (typeof v !== "object") return String(v);
  return exceedsDepth(v) ? "" : JSON.stringify(v);
}

/**
 * A template value whose `{seq}` counter is drawn by the INSERT that stores it (record-store.ts):
 * the counter row is then locked from that statement to COMMIT only, instead of from the
 * template step on. The text around the counter is rendered here; `width` pads as `{seq:N:W}`.
 */
export class CounterValue {
  constructor(
    readonly prefix: string,
    readonly name: string,
    readonly width: number | null,
    readonly suffix: string,
  ) {}

  /** The shortest text it can become (the types step checks that one against the field). */
  shortest(): string {
    return `${this.prefix}${"1".padStart(this.width ?? 1, "0")}${this.suffix}`;
  }
}

export async function renderTemplate(template: string, scope: TemplateScope): Promise<string> {
  return renderParts(templateParts(template), scope);
}

export async function renderParts(parts: readonly TemplatePart[], scope: TemplateScope): Promise<string> {
  const { ctx, now } = scope;
  const stamp = compactTimestamp(now);
  let out = "";
  for (const part of parts) {
    switch (part.kind) {
      case "text":
        out += part.text;
        break;
      case "now":
        out += stamp;
        break;
      case "today":
        out += stamp.slice(0, 8);
        break;
      case "year":
        out += stamp.slice(0, 4);
        break;
      case "user":
        out += ctx.principal.userId;
        break;
      case "tenant":
        out += ctx.principal.tenantId;
        break;
      case "source":
        out += ctx.source ?? "";
        break;
      case "centro_dett":
        // The caller's organisational unit (token claim centro_dett), not the visibility context.
        out += ctx.principal.centroDett ?? ctx.centerDett ?? "";
        break;
      case "ambiente":
        out += ctx.principal.ambiente ?? "";
        break;
      case "uuid":
        out += randomUUID();
        break;
      case "field": {
        out += fieldText(scope.record[part.field]);
        break;
      }
      case "seq": {
        const n = await nextSequenceValue(scope.tx, ctx.principal.tenantId, part.name);
        out += part.width ? String(n).padStart(part.width, "0") : String(n);
        break;
      }
    }
  }
  return out;
}
