import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors.ts";
import { parseListParams, parseNamedSortParams, parseRecordParams } from "../../src/query/rest-params.ts";

function q(entries: Record<string, string | string[]>) {
  const o = Object.create(null) as Record<string, string | string[]>;
  Object.assign(o, entries);
  return o;
}

function failure(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a failure");
}

describe("REST list parameters", () => {
  it("defaults: 100 rows, offset 0, no filter, default TREC rule", () => {
    expect(parseListParams(q({ source: "anag-1" }))).toMatchObject({
      filter: null,
      numRows: 100,
      offset: 0,
      fields: null,
      expand: [],
      condTrec: null,
      sort: [],
      debug: false,
    });
  });

  it("parses filter[F] and filter[F][$op] keys, with lists for $in/$nin/$between", () => {
    const parsed = parseListParams(
      q({
        "filter[NAME]": "Rossi",
        "filter[CREDIT_LIMIT][$gte]": "100",
        "filter[CITY_ID][$in]": "MI,RM",
        "filter[CUST_ID][$between]": "1,3",
        "filter[CODE][like]": "C-%",
      }),
    );
    expect(parsed.filter).toEqual({
      kind: "and",
      items: [
        { kind: "condition", field: "NAME", op: "eq", value: "Rossi", origin: "filter[NAME]" },
        {
          kind: "condition",
          field: "CREDIT_LIMIT",
          op: "gte",
          value: "100",
          origin: "filter[CREDIT_LIMIT][$gte]",
        },
        {
          kind: "condition",
          field: "CITY_ID",
          op: "in",
          value: ["MI", "RM"],
          origin: "filter[CITY_ID][$in]",
        },
        {
          kind: "condition",
          field: "CUST_ID",
          op: "between",
          value: ["1", "3"],
          origin: "filter[CUST_ID][$between]",
        },
        { kind: "condition", field: "CODE", op: "like", value: "C-%", origin: "filter[CODE][like]" },
      ],
    });
  });

  it("combines filter[] with $filter under AND; repeated filter keys are each a condition", () => {
    const parsed = parseListParams(q({ "filter[NAME][$ne]": ["a", "b"], $filter: "VIP eq true" }));
    expect(parsed.filter).toMatchObject({
      kind: "and",
      items: [{ value: "a" }, { value: "b" }, { field: "VIP", value: true, origin: "$filter" }],
    });
  });

  it("parses sort, $order, paging, fields, expand, cond_trec, forceListCost, grouping, debug", () => {
    expect(
      parseListParams(
        q({
          sort: "-NAME,+CODE",
          $num_rows: "25",
          $offset: "50",
          $select: "NAME,CODE",
          include: "CITY",
          $expand: "ADDR",
          cond_trec: "n,C",
          forceListCost: "INTERNAL",
          debug: "true",
        }),
      ),
    ).toMatchObject({
      sort: [
        { field: "NAME", direction: "desc" },
        { field: "CODE", direction: "asc" },
      ],
      numRows: 25,
      offset: 50,
      fields: ["NAME", "CODE"],
      expand: expect.arrayContaining(["CITY", "ADDR"]),
      condTrec: ["N", "C"],
      forceListCost: ["INTERNAL"],
      debug: true,
    });
    expect(parseListParams(q({ $order: "CITY_ID desc, CUST_ID ASC" })).sort).toEqual([
      { field: "CITY_ID", direction: "desc" },
      { field: "CUST_ID", direction: "asc" },
    ]);
    expect(
      parseListParams(q({ groupBy: "CITY_ID", aggregate: "COUNT,SUM(CREDIT_LIMIT),avg:CREDIT_LIMIT" })),
    ).toMatchObject({
      groupBy: ["CITY_ID"],
      aggregates: [
        { fn: "COUNT", field: null, alias: "COUNT" },
        { fn: "SUM", field: "CREDIT_LIMIT", alias: "SUM_CREDIT_LIMIT" },
        { fn: "AVG", field: "CREDIT_LIMIT", alias: "AVG_CREDIT_LIMIT" },
      ],
    });
  });

  it("refuses parameters that would have no effect, naming the one sent", () => {
    const cases: Array<[Record<string, string | string[]>, string, string]> = [
      [
        { sort: "NAME", $order: "CODE DESC" },
        "$order",
        "Give the order once: sort or $order, not both (they are two spellings of one parameter).",
      ],
      [
        { "sort[]": ["NAME", "CODE"] },
        "sort[]",
        "sort[] is not a form of sort: give sort once, as one string (several items separated by commas, e.g. sort=A,B).",
      ],
      [
        { "$fields[0]": "NAME" },
        "$fields[0]",
        "$fields[0] is not a form of $fields: give $fields once, as one string (several items separated by commas, e.g. $fields=A,B).",
      ],
      [
        { $group: "CITY_ID", $fields: "*" },
        "$fields",
        "$fields cannot be combined with $group, groupBy or aggregate: a grouped result's columns are its groups and aggregates.",
      ],
      [
        { aggregate: "COUNT", $select: "NAME" },
        "$select",
        "$select cannot be combined with $group, groupBy or aggregate: a grouped result's columns are its groups and aggregates.",
      ],
      [
        { groupBy: "VIP", forceListCost: "INTERNAL" },
        "forceListCost",
        "forceListCost cannot be combined with $group, groupBy or aggregate: a grouped result's columns are its groups and aggregates.",
      ],
    ];
    for (const [params, field, message] of cases) {
      expect(
        failure(() => parseListParams(q(params))),
        field,
      ).toMatchObject({
        status: 400,
        code: "INVALID_PARAMETER",
        field,
        message,
      });
    }
    // An empty grouping groups nothing: $fields is read.
    expect(parseListParams(q({ $group: "", $fields: "NAME" })).fields).toEqual(["NAME"]);
  });

  it("refuses sort and $order on a named sort, which gives the order", () => {
    for (const name of ["sort", "$order"]) {
      expect(failure(() => parseNamedSortParams(q({ [name]: "NAME" })))).toMatchObject({
        status: 400,
        code: "INVALID_PARAMETER",
        field: name,
        message: `${name} is not taken on /{dim}/sort/{sort_key}: the named sort orders the list. List with GET /{dim}?sort=… for another order.`,
      });
    }
    expect(parseNamedSortParams(q({ $num_rows: "5", "filter[NAME]": "x" }))).toMatchObject({ numRows: 5 });
  });

  it("refuses bad parameters with INVALID_PARAMETER naming the parameter", () => {
    const cases: Array<[Record<string, string | string[]>, string]> = [
      [{ $num_rows: "1001" }, "$num_rows"],
      [{ $num_rows: "-1" }, "$num_rows"],
      [{ $num_rows: "10;DROP" }, "$num_rows"],
      [{ $num_rows: ["1", "2"] }, "$num_rows"],
      [{ $offset: "1.5" }, "$offset"],
      [{ $offset: "99999999999999999999" }, "$offset"],
      [{ cond_trec: "X" }, "cond_trec"],
      [{ debug: "maybe" }, "debug"],
      [{ aggregate: "MEDIAN(X)" }, "aggregate"],
      [{ aggregate: "SUM" }, "aggregate"],
      [{ $order: "NAME sideways" }, "$order"],
      [{ $bogus: "1" }, "$bogus"],
    ];
    for (const [params, field] of cases) {
      expect(failure(() => parseListParams(q(params)))).toMatchObject({
        status: 400,
        code: "INVALID_PARAMETER",
        field,
      });
    }
  });

  it("refuses malformed filter keys and unknown operators with INVALID_FILTER", () => {
    for (const key of ["filter", "filter[]", "filter[NAME][$eq][x]", "filter[NAME", "filterNAME"]) {
      expect(failure(() => parseListParams(q({ [key]: "x" })))).toMatchObject({
        code: "INVALID_FILTER",
        field: key,
      });
    }
    expect(failure(() => parseListParams(q({ "filter[NAME][$regex]": "x" })))).toMatchObject({
      code: "INVALID_FILTER",
      details: { token: "$regex" },
    });
    expect(failure(() => parseListParams(q({ "filter[N][$between]": "1,2,3" })))).toMatchObject({
      code: "INVALID_FILTER",
    });
  });

  it("refuses filter parameters longer than 2000 characters in total", () => {
    expect(failure(() => parseListParams(q({ "filter[NAME][$in]": "x,".repeat(1001) })))).toMatchObject({
      code: "FILTER_TOO_COMPLEX",
    });
  });

  it("takes only the single-record parameters on a detail read", () => {
    expect(parseRecordParams(q({ $fields: "NAME", $expand: "CITY", source: "anag-1" }))).toEqual({
      fields: ["NAME"],
      expand: ["CITY"],
      condTrec: null,
      debug: false,
    });
    expect(failure(() => parseRecordParams(q({ $num_rows: "5" })))).toMatchObject({
      code: "INVALID_PARAMETER",
    });
    // A list parameter names no record: refused, not left unread.
    for (const key of [
      "filter[NAME]",
      "filter[NAME][$ne]",
      "sort",
      "$order",
      "$filter",
      "groupBy",
      "aggregate",
      "forceListCost",
    ]) {
      expect(
        failure(() => parseRecordParams(q({ [key]: "x" }))),
        key,
      ).toMatchObject({
        status: 400,
        code: "INVALID_PARAMETER",
        field: key,
        message: `${key.startsWith("filter") ? "filter[…]" : key} applies to lists; a single record is read by its id and takes only $fields, $select, $expand, include, cond_trec and debug (cond_trec=C reads a cancelled one).`,
      });
    }
    expect(failure(() => parseRecordParams(q({ "include[]": "CITY" })))).toMatchObject({
      code: "INVALID_PARAMETER",
      field: "include[]",
    });
  });
});
