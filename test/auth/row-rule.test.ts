// The row rules the access view keeps (decisions.md §17), pure: the sample metadata with CUST
// scoped by centro_dett. One question, "through which node may the caller do this", answered for
// reads and writes alike (AccessView.nodeFor / sourceFor), the rule through another source kept
// per view (rowRuleThrough), and the in-memory judge of events (row-match).
import { describe, expect, it } from "vitest";
import { accessView } from "../../src/auth/access-view.ts";
import { rowInScope } from "../../src/auth/row-match.ts";
import { fixtureMetadata, fixtureSchema } from "../../src/fixtures/schema.ts";
import { buildModel } from "../../src/metadata/build.ts";
import { rowScopeSql } from "../../src/query/compile.ts";
import { relatedRowScope } from "../../src/query/plan.ts";
import type { PlannedCondition, PlannedFilter } from "../../src/query/types.ts";
import type { Grant, MetadataModel, Operation, RequestContext } from "../../src/types.ts";
import { handContext, sampleFixture } from "../read/support.ts";

function scopedModel(): MetadataModel {
  const rows = fixtureMetadata(fixtureSchema.parse(sampleFixture()));
  return buildModel(
    {
      ...rows,
      TB_DIM: rows.TB_DIM.map((d) => (d.COD_DIM === "CUST" ? { ...d, ROW_SCOPE: "centro_dett" } : d)),
    },
    1,
  );
}

const model = scopedModel();
const cust = model.dimensions.get("CUST")!;

function grant(code: string, operations: Operation[], level: number, extra: Partial<Grant> = {}): Grant {
  const node = model.menuByCode.get(code)!;
  return {
    COD_MENU: code,
    NLEFT: node.nleft,
    NRIGHT: node.nright,
    OPERATIONS: operations,
    LEVEL: level,
    ...extra,
  };
}

/** Reads customers on anag-1 (VIP only), reads and writes orders on sales: a unit MI01 caller. */
function reader(source: string | null): RequestContext {
  return handContext({
    source,
    principal: {
      peso: 2,
      centroDett: "MI01",
      grants: [
        grant("anag-1", ["read"], 1, { ROW_FILTER: "VIP eq true" }),
        grant("sales", ["read", "write"], 2),
      ],
    },
  });
}

describe("the node and the rule a related read or a cascaded write goes through", () => {
  it("nodeFor answers per access: a node that lets the caller read is not one that lets it write", () => {
    const view = accessView(reader("sales-1"), model);
    expect(view.nodeFor("CUST", "read")).toBe("anag-1");
    expect(view.nodeFor("CUST", "update")).toBeNull();
    expect(view.nodeFor("ORD", "update")).toBe("sales-1");
    expect(view.sourceFor("ORD", "update")).toBe("sales-1");
    expect(view.sourceFor("CUST", "read")).toBe("anag-1");
    expect(view.sourceFor("CUST", "update")).toBeNull();
  });

  it("the rule through another source is the grants' of that source, worked out once per view", () => {
    const ctx = reader("sales-1");
    const view = accessView(ctx, model);
    const rule = view.rowRuleThrough(cust, "read", "anag-1");
    expect(view.rowRuleThrough(cust, "read", "anag-1")).toBe(rule);
    expect(rule.unrestricted).toBe(false);
    const scope = relatedRowScope(ctx, model, cust, "anag-1");
    // The unit key and the grant's filter, bound to the caller's values; the same object next time.
    expect(relatedRowScope(ctx, model, cust, "anag-1")).toBe(scope);
    expect(describe_(scope)).toBe("(CENTRO_DETT eq MI01 and VIP eq true)");
  });

  it("with no node: a cascaded write goes by the scope keys alone, a read gets nothing", () => {
    const view = accessView(reader("sales-1"), model);
    const write = view.rowRuleThrough(cust, "update", null);
    expect(
      describe_(write.bind({ user: "u", tenant: "acme", centro_dett: "RM01", ambiente: null, source: null })),
    ).toBe("CENTRO_DETT eq RM01");
    const read = view.rowRuleThrough(cust, "read", null);
    expect(
      read.bind({ user: "u", tenant: "acme", centro_dett: "RM01", ambiente: null, source: null }),
    ).toEqual({
      kind: "none",
    });
  });
});

/** A bound scope as text, to compare whole predicates. */
function describe_(f: PlannedFilter | null): string {
  if (f === null) return "null";
  switch (f.kind) {
    case "condition":
      return `${f.field.code} ${f.op} ${String(f.value)}`;
    case "and":
    case "or":
      return `(${f.items.map(describe_).join(` ${f.kind} `)})`;
    case "not":
      return `not ${describe_(f.item)}`;
    default:
      return f.kind;
  }
}

describe("a row scope judged in memory (events)", () => {
  const field = (code: string) => cust.fieldsByCode.get(code)!;
  const cond = (code: string, op: PlannedCondition["op"], value: unknown): PlannedCondition =>
    ({ kind: "condition", field: field(code), op, value }) as PlannedCondition;

  it("compares the record's value and the parameter by the same rule of the field's type", () => {
    // A DECIMAL as JSON text (numeric columns) against a number or a bigint parameter.
    expect(rowInScope(cond("CREDIT_LIMIT", "eq", 1000), { CREDIT_LIMIT: "1000.00" })).toBe(true);
    expect(rowInScope(cond("CREDIT_LIMIT", "in", [5n, 1000n]), { CREDIT_LIMIT: 1000 })).toBe(true);
    expect(rowInScope(cond("CREDIT_LIMIT", "between", ["900", "1100"]), { CREDIT_LIMIT: "1000" })).toBe(true);
    // A parameter the field's type cannot compare exactly withholds the event, whatever the op.
    expect(rowInScope(cond("NAME", "eq", true), { NAME: "x" })).toBe(false);
    expect(rowInScope(cond("NAME", "ne", true), { NAME: "x" })).toBe(false);
    expect(rowInScope(cond("NAME", "ne", "y"), { NAME: "x" })).toBe(true);
  });

  it("and/or: the deciding value wins over an unknown item; otherwise unknown withholds", () => {
    const unknown = cond("CREDIT_LIMIT", "gt", 10); // undecidable on a text value
    const yes = cond("VIP", "eq", true);
    const no = cond("VIP", "eq", false);
    const rec = { CREDIT_LIMIT: "abc", VIP: true };
    expect(rowInScope({ kind: "or", items: [unknown, yes] }, rec)).toBe(true);
    expect(rowInScope({ kind: "or", items: [unknown, no] }, rec)).toBe(false);
    expect(rowInScope({ kind: "and", items: [unknown, no] }, rec)).toBe(false);
    expect(rowInScope({ kind: "and", items: [yes, yes] }, rec)).toBe(true);
    expect(rowInScope({ kind: "not", item: { kind: "and", items: [unknown, yes] } }, rec)).toBe(false);
    expect(rowInScope({ kind: "not", item: { kind: "and", items: [unknown, no] } }, rec)).toBe(true);
  });
});

describe("a row scope as SQL for statements outside the planner", () => {
  it("appends its values to the statement's own parameters, numbered after them", () => {
    const params: unknown[] = ["acme", 7];
    const scope: PlannedFilter = {
      kind: "or",
      items: [
        { kind: "condition", field: cust.fieldsByCode.get("CENTRO_DETT")!, op: "eq", value: "MI01" },
        { kind: "condition", field: cust.fieldsByCode.get("VIP")!, op: "eq", value: true },
      ],
    };
    const sql = rowScopeSql(scope, params, "$1");
    expect(sql).toBe(` AND ((t."CENTRO_DETT" = $3 OR t."VIP" = $4))`);
    expect(params).toEqual(["acme", 7, "MI01", true]);
    expect(rowScopeSql(null, params, "$1")).toBe("");
  });
});
