// TB_COST.VALIDATION (issue 39 §3): value rules checked on create and update over REST, GraphQL
// and batches (400 INVALID_FIELD_VALUE naming the field and the rule), a GraphQL enum for a list
// of values, the rules in OpenAPI, invalid rules refused when the metadata is written, and
// patterns that could backtrack catastrophically refused.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { importFixture } from "../../src/fixtures/import.ts";
import {
  compileRule,
  MAX_PATTERN_VALUE_LENGTH,
  parseValidationRule,
  patternProblem,
  ruleViolation,
} from "../../src/metadata/validation-rules.ts";
import { updateOne } from "../../src/resolvers/write/operations.ts";
import { printFixtureSchema } from "../../src/schema/print.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { type Client, client, NO_RATE_LIMITS } from "./http.ts";

const Q = "?source=erp";

describe.each(BACKENDS)("validation rules (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let gql: ReturnType<typeof graphqlClient>;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    const token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    anna = client(t.app, token);
    gql = graphqlClient(t.app, token);
    const rules: Array<[string, number, unknown]> = [
      ["CUST", 3, { min_length: 2, max_length: 40, pattern: "[A-Z][A-Za-z ]*" }],
      // Given as JSON text, as a form may send it.
      ["CUST", 9, '{"min": 0, "max": 100}'],
      ["CITY", 3, { values: ["IT", "FR", "DE"] }],
    ];
    for (const [dim, num, rule] of rules) {
      const res = await anna.patch(`/api/v4/core/COST/${dim}/${num}${Q}`, { data: { VALIDATION: rule } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    // RISK_SCORE may be sent on create and update in the sample only with N and M.
    const flags = await anna.patch(`/api/v4/core/COST/CUST/9${Q}`, { data: { COD_ON_OFF: "LDRNM" } });
    expect(flags.status).toBe(200);
  });
  afterAll(async () => {
    await t?.close();
  });

  const createCust = (data: Record<string, unknown>) =>
    anna.post("/api/v4/core/CUST?source=anag-1", { data });

  it("REST create: each rule refused with 400 INVALID_FIELD_VALUE, field and rule; valid values stored", async () => {
    const cases: Array<[Record<string, unknown>, string, string, unknown]> = [
      [{ NAME: "A" }, "NAME", "min_length", 2],
      [{ NAME: `A${"b".repeat(40)}` }, "NAME", "max_length", 40],
      [{ NAME: "lower case" }, "NAME", "pattern", "[A-Z][A-Za-z ]*"],
      [{ NAME: "Ok", RISK_SCORE: -1 }, "RISK_SCORE", "min", 0],
      [{ NAME: "Ok", RISK_SCORE: 101 }, "RISK_SCORE", "max", 100],
    ];
    for (const [data, field, rule, expected] of cases) {
      const res = await createCust(data);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body).toMatchObject({ code: "INVALID_FIELD_VALUE", field, details: { rule, expected } });
      expect(res.body.message).toContain(`CUST.${field}`);
    }
    const city = await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "VR1", NAME: "Nowhere", COUNTRY: "US" },
    });
    expect(city.status).toBe(400);
    expect(city.body).toMatchObject({
      code: "INVALID_FIELD_VALUE",
      field: "COUNTRY",
      details: { rule: "values", expected: ["IT", "FR", "DE"] },
    });

    const ok = await createCust({ NAME: "Valid Name", RISK_SCORE: 100 });
    expect(ok.status, JSON.stringify(ok.body)).toBe(201);
    expect(ok.body.data).toMatchObject({ NAME: "Valid Name", RISK_SCORE: 100 });
    const okCity = await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "VR2", NAME: "Verona", COUNTRY: "IT" },
    });
    expect(okCity.status).toBe(201);
  });

  it("REST update (PATCH): a changed value is checked, a valid one stored", async () => {
    const created = await createCust({ NAME: "Update Me", RISK_SCORE: 5 });
    expect(created.status).toBe(201);
    const id = created.body.data.CUST_ID;
    const bad = await anna.patch(`/api/v4/core/CUST/${id}?source=anag-1`, { data: { RISK_SCORE: 500 } });
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      code: "INVALID_FIELD_VALUE",
      field: "RISK_SCORE",
      details: { rule: "max", expected: 100 },
    });
    const badName = await anna.patch(`/api/v4/core/CUST/${id}?source=anag-1`, { data: { NAME: "x" } });
    expect(badName.body).toMatchObject({ code: "INVALID_FIELD_VALUE", details: { rule: "min_length" } });
    const good = await anna.patch(`/api/v4/core/CUST/${id}?source=anag-1`, { data: { RISK_SCORE: 50 } });
    expect(good.status).toBe(200);
    const stored = await anna.get(`/api/v4/core/CUST/${id}?source=anag-1`);
    expect(stored.body.data).toMatchObject({ NAME: "Update Me", RISK_SCORE: 50 });
  });

  it("batch create: a record breaking a rule fails alone, with the rule in its result", async () => {
    const res = await anna.post("/api/v4/core/CUST/batch?source=anag-1", {
      data: [{ NAME: "Batch Good" }, { NAME: "bad" }, { NAME: "Batch Score", RISK_SCORE: 1000 }],
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ success: 1, failed: 2 });
    const [a, b, c] = res.body.results;
    expect(a).toMatchObject({ index: 0, status: "created" });
    expect(b).toMatchObject({
      index: 1,
      status: "failed",
      error: { code: "INVALID_FIELD_VALUE", field: "NAME", status: 400, details: { rule: "pattern" } },
    });
    expect(c).toMatchObject({
      index: 2,
      status: "failed",
      error: { code: "INVALID_FIELD_VALUE", field: "RISK_SCORE", details: { rule: "max" } },
    });
  });

  it("a context's TB_COST row brings its own rule (center_dett), the base row's applies elsewhere", async () => {
    const ctx = await anna.post(`/api/v4/core/COST${Q}`, {
      data: {
        COD_DIM: "CUST",
        NUM_COST: 103,
        COD_VAR: "NAME",
        COD_ON_OFF: "LDRNM",
        REQUIRED: true,
        CENTER_DETT: "short",
        VALIDATION: { max_length: 5 },
      },
    });
    expect(ctx.status, JSON.stringify(ctx.body)).toBe(201);
    const long = await anna.post("/api/v4/core/CUST?source=anag-1&center_dett=short", {
      data: { NAME: "Longer Name" },
    });
    expect(long.status).toBe(400);
    expect(long.body).toMatchObject({ field: "NAME", details: { rule: "max_length", expected: 5 } });
    // The context's rule replaces the base one: a lower-case name fits it.
    const short = await anna.post("/api/v4/core/CUST?source=anag-1&center_dett=short", {
      data: { NAME: "abc" },
    });
    expect(short.status, JSON.stringify(short.body)).toBe(201);
    expect((await createCust({ NAME: "Longer Name" })).status).toBe(201);
  });

  it("a command writing fields goes through the rules", async () => {
    t.services.commands.register("CUST", {
      name: "rename",
      description: "Sets the name given.",
      input: z.strictObject({ NAME: z.string() }),
      run: ({ deps, request, dim, id, data }) =>
        updateOne(deps, request, dim, id, { NAME: data.NAME }, "patch"),
    });
    const created = await createCust({ NAME: "Before Rename" });
    const id = created.body.data.CUST_ID;
    const rename = (NAME: string) =>
      anna.post("/api/v4/core/CUST/command/rename?source=anag-1", { id, data: { NAME } });
    const bad = await rename("lower");
    expect(bad.status).toBe(400);
    expect(bad.body).toMatchObject({
      code: "INVALID_FIELD_VALUE",
      field: "NAME",
      details: { rule: "pattern" },
    });
    const good = await rename("After Rename");
    expect(good.status, JSON.stringify(good.body)).toBe(200);
    expect(good.body.data.NAME).toBe("After Rename");
  });

  it("a fixture import's records go through the rules", async () => {
    const records = (NAME: string) => ({
      TB_DIM: [],
      TB_VAR: [],
      records: { CUST: [{ tenant_id: "acme", data: { NAME } }] },
    });
    // Refused whole (the importer's MetadataError), naming the record and the rule.
    await expect(importFixture(t.services, records("lower case import"))).rejects.toMatchObject({
      code: "INVALID_METADATA",
      errors: [
        { field: "records.CUST[0]", message: expect.stringContaining("CUST.NAME must match the pattern") },
      ],
    });
    const summary = await importFixture(t.services, records("Imported Name"));
    expect(summary.recordsCreated).toBe(1);
  });

  it("GraphQL: the values are an enum of the create and update inputs; other rules checked by the write", async () => {
    const schema = await gql(
      `{ create: __type(name: "CITY_create_input") { inputFields { name type { kind name } } }
         update: __type(name: "CITY_update_input") { inputFields { name type { kind name } } }
         enum: __type(name: "CITY_COUNTRY_enum") { enumValues { name } } }`,
    );
    expect(schema.status).toBe(200);
    const country = (which: "create" | "update") =>
      schema.body.data[which].inputFields.find((f: { name: string }) => f.name === "COUNTRY");
    expect(country("create").type).toEqual({ kind: "ENUM", name: "CITY_COUNTRY_enum" });
    expect(country("update").type).toEqual({ kind: "ENUM", name: "CITY_COUNTRY_enum" });
    expect(schema.body.data.enum.enumValues.map((v: { name: string }) => v.name)).toEqual(["IT", "FR", "DE"]);

    const refusedByGraphQL = await gql(
      `mutation { CITY_create(source: "anag-3", data: { CITY_ID: "GQ1", NAME: "Paris", COUNTRY: US }) { event_id } }`,
    );
    expect(refusedByGraphQL.body.errors?.[0]?.message).toMatch(/CITY_COUNTRY_enum/);
    expect(refusedByGraphQL.body.data ?? null).toBeNull();
    const created = await gql(
      `mutation { CITY_create(source: "anag-3", data: { CITY_ID: "GQ2", NAME: "Paris", COUNTRY: FR }) { data { COUNTRY } } }`,
    );
    expect(created.body.errors).toBeUndefined();
    expect(created.body.data.CITY_create.data).toEqual({ COUNTRY: "FR" });

    const refusedByRule = await gql(
      `mutation { CUST_create(source: "anag-1", data: { NAME: "no capital" }) { event_id } }`,
    );
    expect(refusedByRule.body.errors[0].extensions).toMatchObject({
      code: "INVALID_FIELD_VALUE",
      field: "NAME",
      details: { rule: "pattern" },
    });
  });

  it("GET /COST shows each row's rule as stored (it left VALIDATION out)", async () => {
    const res = await anna.get(`/api/v4/core/COST${Q}&filter[COD_DIM]=CUST`);
    expect(res.status).toBe(200);
    const rows = res.body.data as Array<{
      NUM_COST: number;
      CENTER_DETT: string | null;
      VALIDATION: unknown;
    }>;
    const base = (num: number) => rows.find((r) => r.NUM_COST === num && r.CENTER_DETT === null);
    expect(base(3)?.VALIDATION).toEqual({ min_length: 2, max_length: 40, pattern: "[A-Z][A-Za-z ]*" });
    expect(base(9)?.VALIDATION).toBeTruthy();
    expect(rows.filter((r) => r.VALIDATION === null).length).toBeGreaterThan(0);
  });

  it("OpenAPI shows the rules in the create and update schemas", async () => {
    const res = await anna.get("/api/v4/openapi.json");
    expect(res.status).toBe(200);
    const schemas = res.body.components.schemas;
    expect(schemas.CUST_create.properties.NAME).toMatchObject({
      minLength: 2,
      maxLength: 40,
      pattern: "^(?:[A-Z][A-Za-z ]*)$",
    });
    expect(schemas.CUST_update.properties.RISK_SCORE).toMatchObject({ minimum: 0, maximum: 100 });
    expect(schemas.CITY_create.properties.COUNTRY.enum).toEqual(["IT", "FR", "DE", null]);
  });

  it("an invalid rule is refused when the metadata is written, naming the problem", async () => {
    const cases: Array<[unknown, RegExp]> = [
      ["{not json", /not valid JSON/],
      [{ minimum: 1 }, /unknown rule "minimum"/],
      [{ min: 5, max: 1 }, /min \(5\) is greater than max \(1\)/],
      [{ pattern: "[a-" }, /not a valid regular expression/],
      [{ values: [] }, /values must be a non-empty list/],
      [{ values: "IT" }, /values must be a non-empty list/],
      [{ min: 1 }, /min applies to INTEGER and DECIMAL fields, not STRING/],
      [{ pattern: "(a+)+$" }, /catastrophic backtracking/],
    ];
    for (const [rule, message] of cases) {
      const res = await anna.patch(`/api/v4/core/COST/CITY/2${Q}`, { data: { VALIDATION: rule } });
      expect(res.status, JSON.stringify(rule)).toBe(400);
      expect(res.body).toMatchObject({ code: "INVALID_METADATA" });
      expect(res.body.errors[0].field).toMatch(/^TB_COST\[\d+\]\.VALIDATION$/);
      expect(res.body.errors.map((e: { message: string }) => e.message).join("; ")).toMatch(message);
    }
    // Nothing was written: a CITY name is still free.
    const city = await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "VR3", NAME: "aaaa", COUNTRY: "DE" },
    });
    expect(city.status).toBe(201);
  });
});

describe("pattern safety", () => {
  it("refuses patterns that backtrack catastrophically, accepts ordinary ones", () => {
    for (const p of [
      "(a+)+$",
      "(a*)*",
      "(a|aa)+",
      "(?:x+y?)+",
      "(a)\\1",
      "(?=a)a",
      "a*a*a*",
      "[a-z]+@[a-z]+\\.[a-z]+",
    ])
      expect(patternProblem(p), p).not.toBeNull();
    for (const p of [
      "[A-Z]{2}[0-9]{5}",
      "[a-z0-9._-]+@[a-z0-9.-]+",
      "[A-Z]{2}-[0-9]{3}-?[A-Z]{2}",
      "(ab)+",
      "\\(\\d+\\)",
      "IT|FR",
    ])
      expect(patternProblem(p), p).toBeNull();
  });

  it("a value longer than the bound is refused by a pattern rule without being matched", () => {
    const compiled = compileRule(parseValidationRule({ pattern: "a+" }, "STRING").rule)!;
    expect(ruleViolation(compiled, "a".repeat(MAX_PATTERN_VALUE_LENGTH))).toBeNull();
    expect(ruleViolation(compiled, "a".repeat(MAX_PATTERN_VALUE_LENGTH + 1))).toMatchObject({
      rule: "pattern",
      message: expect.stringContaining(`longer than ${MAX_PATTERN_VALUE_LENGTH}`),
    });
  });
});

describe("GraphQL enums of validation rules", () => {
  const dim = (code: string) => ({ COD_DIM: code, TABLE_NAME: `TB_${code}`, ID_FIELD: "ID" });
  const field = (d: string, code: string, n: number) => ({
    COD_DIM: d,
    NUM_VAR: n,
    COD_VAR: code,
    DATA_TYPE: code === "N" ? "INTEGER" : "STRING",
    LENGTH: 10,
  });
  const cost = (d: string, v: string, n: number, values: unknown[], CENTER_DETT?: string) => ({
    COD_DIM: d,
    NUM_COST: n,
    COD_VAR: v,
    COD_ON_OFF: "LDRNM",
    VALIDATION: { values },
    ...(CENTER_DETT ? { CENTER_DETT } : {}),
  });
  const sdl = printFixtureSchema({
    TB_DIM: [dim("A_B"), dim("A"), dim("P")],
    TB_VAR: [
      field("A_B", "ID", 1),
      field("A_B", "C", 2),
      field("A", "ID", 1),
      field("A", "B_C", 2),
      field("P", "ID", 1),
      field("P", "N", 2),
      field("P", "DASH", 3),
      field("P", "CTX", 4),
      field("P", "SAME", 5),
    ],
    TB_COST: [
      cost("A_B", "C", 1, ["X", "Y"]),
      cost("A", "B_C", 1, ["X", "Y"]),
      cost("P", "N", 1, [1, 2]),
      cost("P", "DASH", 2, ["A-1", "B-2"]),
      cost("P", "CTX", 3, ["ON", "OFF"]),
      cost("P", "CTX", 4, ["ON", "OFF", "AUTO"], "form"),
      cost("P", "SAME", 5, ["ON", "OFF"]),
      cost("P", "SAME", 6, ["ON", "OFF"], "form"),
    ],
  });
  const inputField = (type: string, name: string) => {
    const body = sdl.split(`input ${type} {`)[1]!.split("}")[0]!;
    return body.match(new RegExp(`\\n\\s*${name}: (\\w+)`))?.[1];
  };

  it("one enum per name: of two fields whose enums share a name, the second keeps its scalar", () => {
    expect(sdl.match(/^enum A_B_C_enum \{/gm)).toHaveLength(1);
    const types = [inputField("A_create_input", "B_C"), inputField("A_B_create_input", "C")].sort();
    expect(types).toEqual(["A_B_C_enum", "String"]);
  });

  it("numbers, values that are not GraphQL names and contexts with other lists keep the scalar", () => {
    expect(inputField("P_create_input", "N")).toBe("Int64");
    expect(inputField("P_create_input", "DASH")).toBe("String");
    expect(inputField("P_create_input", "CTX")).toBe("String");
    expect(inputField("P_create_input", "SAME")).toBe("P_SAME_enum");
    expect(inputField("P_update_input", "SAME")).toBe("P_SAME_enum");
  });
});
