// Property tests of the filter language: any text either parses and compiles or fails with a 400;
// and compiled filters select exactly the rows an in-memory evaluation selects over a small table.
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors.ts";
import { compileCount, compileRecordsPage } from "../../src/query/compile.ts";
import { parseFilterExpression } from "../../src/query/filter-parser.ts";
import { planCount, planList } from "../../src/query/plan.ts";
import { parseListParams } from "../../src/query/rest-params.ts";
import { emptyListQuery } from "../../src/query/types.ts";
import { createReadContext, listRecords, type ReadContext } from "../../src/resolvers/read/index.ts";
import type { Services } from "../../src/services.ts";
import { BACKENDS, createTestServices } from "../helpers/env.ts";
import { authorizedDimension, handContext, sampleModel } from "../read/support.ts";

// ---------------------------------------------------------------- any text: a result or a 400

const model = sampleModel();
const cust = authorizedDimension(model, "CUST");

function parsesAndCompilesOr400(text: string): void {
  try {
    const filter = parseFilterExpression(text);
    const ctx = handContext();
    const plan = planList(ctx, model, cust, emptyListQuery({ filter }));
    if (plan.kind !== "records") throw new Error("records plan expected");
    const q = compileRecordsPage(plan);
    expect(q.params[0]).toBe("acme");
    compileCount(planCount(ctx, cust, emptyListQuery({ filter })));
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    expect(err.status).toBe(400);
    expect([
      "INVALID_FILTER",
      "FILTER_TOO_COMPLEX",
      "INVALID_FIELD",
      "INVALID_FIELD_VALUE",
      "FIELD_NOT_SEARCHABLE",
    ]).toContain(err.code);
  }
}

const FRAGMENTS = [
  "NAME",
  "CUST_ID",
  "CREDIT_LIMIT",
  "VIP",
  "NOTES",
  "NOPE",
  "eq",
  "ne",
  "gt",
  "ge",
  "lt",
  "le",
  "and",
  "or",
  "not",
  "(",
  ")",
  ",",
  "'x'",
  "'it''s'",
  '"q\\"q"',
  "'",
  "\\",
  "12",
  "-3.5",
  "1e999",
  "true",
  "null",
  "startwith",
  "contains",
  "equals",
  ";",
  "--",
  "/*",
  "ü",
  "\u0000",
];

describe("random $filter text", () => {
  it("either parses and compiles, or fails with a 400 (arbitrary strings)", () => {
    fc.assert(fc.property(fc.string({ maxLength: 80 }), parsesAndCompilesOr400), { numRuns: 500 });
  });

  it("either parses and compiles, or fails with a 400 (token soup)", () => {
    fc.assert(
      fc.property(fc.array(fc.constantFrom(...FRAGMENTS), { maxLength: 30 }), fc.boolean(), (parts, spaced) =>
        parsesAndCompilesOr400(parts.join(spaced ? " " : "")),
      ),
      { numRuns: 1500 },
    );
  });
});

// ---------------------------------------------------------------- compiled = evaluated in memory

type Value = number | string | boolean | null;
interface Row {
  PT_ID: number;
  N: number | null;
  S: string | null;
  B: boolean | null;
  D: number | null;
}

const S_VALUES = ["", "a", "b", "ab", "ba", "a'b", "a%b", "A", "b_", 'x"y', "a\\b", null];
const N_VALUES = [-2, -1, 0, 1, 2, 3, null];
const D_VALUES = [-1.5, 0, 0.25, 2, 10.75, null];
const B_VALUES = [true, false, null];

function seededRows(count: number): Array<Omit<Row, "PT_ID">> {
  let seed = 7;
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2147483648;
    return seed % n;
  };
  const pick = <T>(list: readonly T[]) => list[next(list.length)]!;
  return Array.from({ length: count }, () => ({
    N: pick(N_VALUES),
    S: pick(S_VALUES),
    B: pick(B_VALUES),
    D: pick(D_VALUES),
  }));
}

const ACME_ROWS = seededRows(40);

const PROPERTY_FIXTURE = {
  tenants: [{ TENANT_ID: "acme" }, { TENANT_ID: "globex" }],
  TB_MENU: [{ COD_MENU: "pt-1", NLEFT: 1, NRIGHT: 2, DESC_MENU: "Property table", COD_DIM: "PT" }],
  TB_DIM: [{ COD_DIM: "PT", DESC_DIM: "Property table", TABLE_NAME: "TB_PROP_PT00", ID_FIELD: "PT_ID" }],
  TB_VAR: [
    { COD_DIM: "PT", NUM_VAR: 1, COD_VAR: "PT_ID", DATA_TYPE: "INTEGER", LENGTH: 10, NULLABLE: false },
    { COD_DIM: "PT", NUM_VAR: 2, COD_VAR: "N", DATA_TYPE: "INTEGER", LENGTH: 10, NULLABLE: true },
    { COD_DIM: "PT", NUM_VAR: 3, COD_VAR: "S", DATA_TYPE: "STRING", LENGTH: 10, NULLABLE: true },
    { COD_DIM: "PT", NUM_VAR: 4, COD_VAR: "B", DATA_TYPE: "BOOLEAN", NULLABLE: true },
    { COD_DIM: "PT", NUM_VAR: 5, COD_VAR: "D", DATA_TYPE: "DECIMAL", LENGTH: 8, DECIMALS: 2, NULLABLE: true },
  ],
  records: {
    PT: [
      ...ACME_ROWS.map((data) => ({ tenant_id: "acme", data })),
      ...seededRows(3).map((data) => ({ tenant_id: "globex", data: { ...data, S: "a" } })),
    ],
  },
};

type Op = "eq" | "ne" | "gt" | "gte" | "lt" | "lte" | "startswith" | "endswith" | "contains";
type Expr =
  | { kind: "cond"; field: keyof Row; op: Op; value: Value }
  | { kind: "and" | "or"; items: [Expr, Expr] }
  | { kind: "not"; item: Expr };

const COMPARE_OPS: Op[] = ["eq", "ne", "gt", "gte", "lt", "lte"];

const condArb: fc.Arbitrary<Expr> = fc.oneof(
  fc.record({
    kind: fc.constant("cond" as const),
    field: fc.constantFrom<keyof Row>("PT_ID", "N"),
    op: fc.constantFrom(...COMPARE_OPS),
    value: fc.oneof(
      { weight: 8, arbitrary: fc.integer({ min: -3, max: 45 }) },
      { weight: 1, arbitrary: fc.constant(null) },
    ),
  }),
  fc.record({
    kind: fc.constant("cond" as const),
    field: fc.constant<keyof Row>("S"),
    op: fc.constantFrom<Op>(...COMPARE_OPS, "startswith", "endswith", "contains"),
    value: fc.oneof(
      {
        weight: 8,
        arbitrary: fc.string({
          unit: fc.constantFrom("a", "b", "A", "'", '"', "%", "_", "\\"),
          maxLength: 3,
        }),
      },
      { weight: 1, arbitrary: fc.constant(null) },
    ),
  }),
  fc.record({
    kind: fc.constant("cond" as const),
    field: fc.constant<keyof Row>("B"),
    op: fc.constantFrom<Op>("eq", "ne"),
    value: fc.constantFrom(true, false, null),
  }),
  fc.record({
    kind: fc.constant("cond" as const),
    field: fc.constant<keyof Row>("D"),
    op: fc.constantFrom(...COMPARE_OPS),
    value: fc.constantFrom(-1.5, 0, 0.25, 2, 3.1, 10.75, 10.75, null),
  }),
);

/** Depth at most 4 and at most 16 conditions: inside the limits, so every valid filter must run. */
function exprArb(depth: number): fc.Arbitrary<Expr> {
  if (depth === 0) return condArb;
  const sub = exprArb(depth - 1);
  return fc.oneof(
    { weight: 2, arbitrary: condArb },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("and" as const), items: fc.tuple(sub, sub) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("or" as const), items: fc.tuple(sub, sub) }) },
    { weight: 1, arbitrary: fc.record({ kind: fc.constant("not" as const), item: sub }) },
  );
}

const WORDS: Record<Op, string> = {
  eq: "eq",
  ne: "ne",
  gt: "gt",
  gte: "ge",
  lt: "lt",
  lte: "le",
  startswith: "startwith",
  endswith: "endwith",
  contains: "contains",
};

interface Style {
  upper: boolean;
  quote: "double-single" | "backslash" | "double-quote";
}

/** A backslash always escapes the next character; a quote may also be doubled. */
function quoteString(s: string, style: Style): string {
  const escaped = s.replaceAll("\\", "\\\\");
  if (style.quote === "double-single") return `'${escaped.replaceAll("'", "''")}'`;
  if (style.quote === "backslash") return `'${escaped.replaceAll("'", "\\'")}'`;
  return `"${escaped.replaceAll('"', '""')}"`;
}

function literal(v: Value, style: Style): string {
  if (v === null) return style.upper ? "NULL" : "null";
  if (typeof v === "string") return quoteString(v, style);
  return String(v);
}

function render(e: Expr, style: Style): string {
  const kw = (w: string) => (style.upper ? w.toUpperCase() : w);
  switch (e.kind) {
    case "cond":
      if (e.op === "startswith" || e.op === "endswith" || e.op === "contains") {
        return `${kw(WORDS[e.op])}(${e.field}, ${literal(e.value, style)})`;
      }
      return `${e.field} ${kw(WORDS[e.op])} ${literal(e.value, style)}`;
    case "not":
      return `${kw("not")} (${render(e.item, style)})`;
    default:
      return `(${render(e.items[0], style)}) ${kw(e.kind)} (${render(e.items[1], style)})`;
  }
}

function valid(e: Expr): boolean {
  if (e.kind === "cond") return e.value !== null || e.op === "eq" || e.op === "ne";
  if (e.kind === "not") return valid(e.item);
  return valid(e.items[0]) && valid(e.items[1]);
}

/** Two-valued semantics: a comparison with a null column is false; ne (its negation) true. */
function evaluate(e: Expr, row: Row): boolean {
  switch (e.kind) {
    case "and":
      return evaluate(e.items[0], row) && evaluate(e.items[1], row);
    case "or":
      return evaluate(e.items[0], row) || evaluate(e.items[1], row);
    case "not":
      return !evaluate(e.item, row);
    case "cond": {
      const x = row[e.field];
      const v = e.value;
      if (v === null) return e.op === "eq" ? x === null : x !== null;
      if (e.op === "ne") return x === null || x !== v;
      if (x === null) return false;
      switch (e.op) {
        case "eq":
          return x === v;
        case "gt":
          return x > v;
        case "gte":
          return x >= v;
        case "lt":
          return x < v;
        case "lte":
          return x <= v;
        case "startswith":
          return String(x).startsWith(String(v));
        case "endswith":
          return String(x).endsWith(String(v));
        case "contains":
          return String(x).includes(String(v));
      }
    }
  }
}

// filter[...] parameters: flat conditions, every operator of the bracket form.
type ParamCond = { field: keyof Row; op: string; raw: string; test: (x: Value) => boolean };

function likeRegex(pattern: string): RegExp {
  let re = "";
  for (const ch of pattern)
    re += ch === "%" ? "[\\s\\S]*" : ch === "_" ? "[\\s\\S]" : ch.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`^${re}$`);
}

const paramCondArb: fc.Arbitrary<ParamCond> = fc.oneof(
  fc
    .tuple(
      fc.constantFrom("N", "PT_ID") as fc.Arbitrary<keyof Row>,
      fc.constantFrom("$eq", "$ne", "$gt", "$gte", "$lt", "$lte"),
      fc.integer({ min: -3, max: 45 }),
    )
    .map(([field, op, n]) => ({
      field,
      op,
      raw: String(n),
      test: (x: Value) => {
        if (op === "$ne") return x === null || x !== n;
        if (x === null) return false;
        const v = x as number;
        return op === "$eq"
          ? v === n
          : op === "$gt"
            ? v > n
            : op === "$gte"
              ? v >= n
              : op === "$lt"
                ? v < n
                : v <= n;
      },
    })),
  fc
    .tuple(
      fc.constantFrom("$in", "$nin"),
      fc.uniqueArray(fc.integer({ min: -3, max: 4 }), { minLength: 1, maxLength: 4 }),
    )
    .map(([op, list]) => ({
      field: "N" as const,
      op,
      raw: list.join(","),
      test: (x: Value) =>
        op === "$in" ? x !== null && list.includes(x as number) : x === null || !list.includes(x as number),
    })),
  fc.tuple(fc.integer({ min: -3, max: 3 }), fc.integer({ min: -3, max: 3 })).map(([a, b]) => ({
    field: "N" as const,
    op: "$between",
    raw: `${a},${b}`,
    test: (x: Value) => x !== null && (x as number) >= a && (x as number) <= b,
  })),
  fc.string({ unit: fc.constantFrom("a", "b", "%", "_", "'"), maxLength: 4 }).map((pattern) => ({
    field: "S" as const,
    op: "$like",
    raw: pattern,
    test: (x: Value) => x !== null && likeRegex(pattern).test(String(x)),
  })),
  fc
    .tuple(
      fc.constantFrom("$in", "$nin", "$eq"),
      fc.uniqueArray(fc.constantFrom<string>("a", "b", "ab", "a'b", "A", ""), { minLength: 1, maxLength: 3 }),
    )
    .map(([op, list]) => ({
      field: "S" as const,
      op,
      raw: op === "$eq" ? list[0]! : list.join(","),
      test: (x: Value) => {
        const values = op === "$eq" ? [list[0]!] : list;
        return op === "$nin"
          ? x === null || !values.includes(x as string)
          : x !== null && values.includes(x as string);
      },
    })),
  fc.constantFrom("true", "false", "1", "0").map((raw) => ({
    field: "B" as const,
    op: "$eq",
    raw,
    test: (x: Value) => x !== null && x === (raw === "true" || raw === "1"),
  })),
  fc
    .tuple(fc.constantFrom("$gt", "$lte"), fc.constantFrom("-1.5", "0", "0.25", "2.0", "1e1"))
    .map(([op, raw]) => ({
      field: "D" as const,
      op,
      raw,
      test: (x: Value) =>
        x !== null && (op === "$gt" ? (x as number) > Number(raw) : (x as number) <= Number(raw)),
    })),
);

describe.each(BACKENDS)("compiled filters against in-memory evaluation (%s)", (backend) => {
  let services: Services;
  let rc: ReadContext;
  let rows: Row[];

  beforeAll(async () => {
    services = await createTestServices(backend, { fixture: PROPERTY_FIXTURE });
    rc = createReadContext(
      { db: services.db, metadata: services.metadata },
      handContext({
        source: "pt-1",
        principal: { grants: [{ COD_MENU: "pt-1", NLEFT: 1, NRIGHT: 2, OPERATIONS: ["read"], LEVEL: 1 }] },
      }),
    );
    const stored = await services.db.query<Row>(
      `SELECT "PT_ID", "N", "S", "B", "D" FROM "TB_PROP_PT00" WHERE "TENANT_ID" = 'acme' ORDER BY "PT_ID"`,
    );
    rows = stored.rows;
  });

  afterAll(async () => {
    await services?.close();
  });

  async function selectedIds(query: ReturnType<typeof emptyListQuery>): Promise<number[]> {
    const result = await listRecords(rc, "PT", query);
    return result.data.map((r) => r.PT_ID as number);
  }

  it("holds the table the fixture describes", () => {
    expect(rows).toHaveLength(ACME_ROWS.length);
    expect(rows.map(({ PT_ID: _, ...rest }) => rest)).toEqual(ACME_ROWS);
  });

  it("selects the same rows as the in-memory evaluation ($filter)", async () => {
    let compared = 0;
    await fc.assert(
      fc.asyncProperty(
        exprArb(4),
        fc.record({
          upper: fc.boolean(),
          quote: fc.constantFrom<Style["quote"]>("double-single", "backslash", "double-quote"),
        }),
        async (expr, style) => {
          const text = render(expr, style);
          let ids: number[];
          try {
            ids = await selectedIds(emptyListQuery({ filter: parseFilterExpression(text), numRows: 1000 }));
          } catch (err) {
            if (!(err instanceof ApiError) || valid(expr)) throw err;
            expect(err.status).toBe(400);
            return;
          }
          expect(valid(expr), text).toBe(true);
          expect(ids, text).toEqual(rows.filter((r) => evaluate(expr, r)).map((r) => r.PT_ID));
          compared++;
        },
      ),
      { numRuns: 250 },
    );
    // Most generated filters are valid, so the comparison really ran.
    expect(compared).toBeGreaterThan(125);
  });

  it("selects the same rows as the in-memory evaluation (filter[] parameters)", async () => {
    await fc.assert(
      fc.asyncProperty(fc.array(paramCondArb, { minLength: 1, maxLength: 4 }), async (conds) => {
        const params = Object.create(null) as Record<string, string[]>;
        for (const c of conds) {
          const key = `filter[${c.field}][${c.op}]`;
          params[key] = [...(params[key] ?? []), c.raw];
        }
        const ids = await selectedIds({ ...parseListParams(params), numRows: 1000 });
        const expected = rows.filter((r) => conds.every((c) => c.test(r[c.field]))).map((r) => r.PT_ID);
        expect(ids, JSON.stringify(params)).toEqual(expected);
      }),
      { numRuns: 120 },
    );
  });
});
