// The metadata model (src/metadata/build.ts) over the sample fixture's rows and small hand-made
// rows: flags per center_dett context, relation names, weights, display fields, data types,
// defaults, audit fields. Pure functions: no database.
import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { fixtureMetadata, fixtureSchema } from "../../src/fixtures/schema.ts";
import { buildModel, fieldConfig, menuSubtree } from "../../src/metadata/build.ts";
import { normalizeDataType } from "../../src/metadata/data-types.ts";
import { validateMetadata } from "../../src/metadata/validate.ts";
import type { DimensionDef, MetadataRows } from "../../src/types.ts";
import { SAMPLE_FIXTURE } from "../helpers/env.ts";

function sampleRows(): MetadataRows {
  return fixtureMetadata(fixtureSchema.parse(JSON.parse(readFileSync(SAMPLE_FIXTURE, "utf8"))));
}

function rows(partial: Partial<MetadataRows>): MetadataRows {
  return {
    TB_DIM: [],
    TB_VAR: [],
    TB_COST: [],
    TB_OBJECT: [],
    TB_MENU: [],
    TB_SORT: [],
    TB_DOCUMENT: [],
    ...partial,
  };
}

function dim(model: ReturnType<typeof buildModel>, code: string): DimensionDef {
  const d = model.dimensions.get(code);
  if (!d) throw new Error(`no dimension ${code}`);
  return d;
}

const flags = (s: ReadonlySet<string>) => [...s].sort().join("");

describe("buildModel over the sample fixture", () => {
  const sample = sampleRows();
  const model = buildModel(sample, 7);

  it("is valid metadata and keeps the version", () => {
    expect(validateMetadata(sample)).toEqual([]);
    expect(model.version).toBe(7);
    expect([...model.dimensions.keys()].sort()).toEqual(
      ["ADDR", "CITY", "CUST", "LST", "ORD", "ORDL", "PRICE", "PROD"].sort(),
    );
  });

  it("a TB_COST or TB_OBJECT row naming a dimension or field that does not exist is a problem at its COD_DIM or COD_VAR", () => {
    const broken = sampleRows();
    const cost = broken.TB_COST[0]!;
    const object = broken.TB_OBJECT[0]!;
    broken.TB_COST.push({ ...cost, COD_DIM: "GHOST" }, { ...cost, COD_VAR: "GHOST_FIELD" });
    broken.TB_OBJECT.push({ ...object, COD_DIM: "GHOST" }, { ...object, COD_VAR: "GHOST_FIELD" });
    const c = broken.TB_COST.length - 2;
    const o = broken.TB_OBJECT.length - 2;
    const problems = validateMetadata(broken);
    // A row naming a missing dimension, and one naming a missing field of its dimension, per table.
    for (const [table, at, dim] of [
      ["TB_COST", c, cost.COD_DIM],
      ["TB_OBJECT", o, object.COD_DIM],
    ] as const) {
      expect(problems).toContainEqual({
        path: `${table}[${at}].COD_DIM`,
        message: "dimension GHOST does not exist in TB_DIM",
      });
      expect(problems).toContainEqual({
        path: `${table}[${at + 1}].COD_VAR`,
        message: `field ${dim}.GHOST_FIELD does not exist in TB_VAR`,
      });
    }
  });

  it("a key whose type is not its target's is a problem at its DATA_TYPE", () => {
    const rows = sampleRows();
    // ORD.CUST_ID names CUST's INTEGER id: as a STRING every value would name no record.
    const at = rows.TB_VAR.findIndex((v) => v.COD_DIM === "ORD" && v.COD_VAR === "CUST_ID");
    rows.TB_VAR[at] = { ...rows.TB_VAR[at]!, DATA_TYPE: "STRING", LENGTH: 20 };
    expect(validateMetadata(rows)).toContainEqual({
      path: `TB_VAR[${at}].DATA_TYPE`,
      message: expect.stringContaining("ORD.CUST_ID is STRING but names CUST.CUST_ID, which is INTEGER"),
    });
  });

  it("a template that cannot give its field's type is a problem at VALUE_TEMP; fitting ones are not", () => {
    const base = sampleRows();
    const typeOf = (dim: string, field: string) =>
      base.TB_VAR.find((v) => v.COD_DIM === dim && v.COD_VAR === field)!.DATA_TYPE;
    const cost = base.TB_COST.find((c) => typeOf(c.COD_DIM, c.COD_VAR) === "DECIMAL")!;
    const judged = (VALUE_TEMP: string, field = cost.COD_VAR) => {
      const rows = sampleRows();
      const at = rows.TB_COST.findIndex((c) => c.COD_DIM === cost.COD_DIM && c.COD_VAR === field);
      rows.TB_COST[at] = { ...rows.TB_COST[at]!, VALUE_TEMP };
      return validateMetadata(rows).filter((p) => p.path === `TB_COST[${at}].VALUE_TEMP`);
    };
    for (const bad of ["abc", "{user}", "1{uuid}", "{now}"])
      expect(judged(bad), bad).toEqual([
        { path: expect.any(String), message: expect.stringContaining("DECIMAL") },
      ]);
    for (const good of ["0", "12.5", "{year}", "{seq:X:4}"]) expect(judged(good), good).toEqual([]);
  });

  it("a TB_DOCUMENT definition is checked when written: part names, dimensions and the fields it names", () => {
    const broken = sampleRows();
    const doc = broken.TB_DOCUMENT[0]!;
    const part = { name: "lines", dim: "PRICE", join: { PROD_ID: "PROD_ID" } };
    const definitions: Array<[unknown, string, string]> = [
      // A part named as a root field would replace that field's value in the answer.
      [{ parts: [{ ...part, name: "PROD_ID" }] }, "parts.0.name", "is a field of PROD"],
      [{ parts: [{ ...part, name: "__proto__" }] }, "parts.0.name", "a part's name must be a letter"],
      [{ parts: [part, part] }, "parts.1.name", "named twice"],
      [{ parts: [{ ...part, dim: "NOPE" }] }, "parts.0.dim", "dimension NOPE does not exist"],
      [{ parts: [{ ...part, join: { NOPE: "PROD_ID" } }] }, "parts.0.join", '"NOPE" is not a field of PRICE'],
      [{ parts: [{ ...part, join: { PROD_ID: "NOPE" } }] }, "parts.0.join", '"NOPE" is not a field of PROD'],
      [{ parts: [{ ...part, fields: ["NOPE"] }] }, "parts.0.fields", "not a field of PRICE"],
      [{ parts: [{ ...part, params: { p: "NOPE" } }] }, "parts.0.params", "not a field of PRICE"],
      [{ fields: ["NOPE"], parts: [] }, "fields", "not a field of PROD"],
      [{ parts: "none" }, "parts", ""],
    ];
    for (const [DEFINITION, at, message] of definitions) {
      const withDoc = { ...broken, TB_DOCUMENT: [{ ...doc, DEFINITION }] };
      expect(validateMetadata(withDoc), JSON.stringify(DEFINITION)).toContainEqual({
        path: `TB_DOCUMENT[0].DEFINITION.${at}`,
        message: expect.stringContaining(message),
      });
    }
  });

  it("dimension properties: table, id field and type, cascades", () => {
    const cust = dim(model, "CUST");
    expect(cust).toMatchObject({
      code: "CUST",
      description: "Customers",
      tableName: "TB_ANAG_CUST00",
      idField: "CUST_ID",
      idType: "INTEGER",
      auditStyle: "TREC",
      cascadeDelete: ["ADDR"],
      insertCascade: [],
    });
    expect(dim(model, "CITY").idType).toBe("STRING");
    expect(dim(model, "ORD")).toMatchObject({ cascadeDelete: ["ORDL"], insertCascade: ["ORDL"] });
  });

  it("fields in NUM_VAR order, then the audit fields", () => {
    expect(dim(model, "CUST").fields.map((f) => f.code)).toEqual([
      "CUST_ID",
      "CODE",
      "NAME",
      "CITY_ID",
      "EMAIL",
      "CREDIT_LIMIT",
      "VIP",
      "NOTES",
      "RISK_SCORE",
      "SALES_REP",
      "INTERNAL",
      "TREC",
      "CDATA",
      "OWNER",
      "LDATA",
      "LOWNER",
    ]);
    const email = dim(model, "CUST").fieldsByCode.get("EMAIL")!;
    expect(email).toMatchObject({
      dataType: "STRING",
      length: 120,
      nullable: true,
      isId: false,
      system: false,
    });
    expect(dim(model, "CUST").fieldsByCode.get("CREDIT_LIMIT")).toMatchObject({
      dataType: "DECIMAL",
      decimals: 2,
    });
  });

  it("CUST.SALES_REP is LDRM, but LDRNM with VALUE_TEMP {user} in context nuovo", () => {
    const rep = dim(model, "CUST").fieldsByCode.get("SALES_REP")!;
    expect(rep.config.codOnOff).toBe("LDRM");
    expect(flags(rep.config.flags)).toBe(flags(new Set("LDRM")));
    expect(rep.config.valueTemp).toBeNull();
    const nuovo = fieldConfig(rep, "nuovo");
    expect(nuovo.codOnOff).toBe("LDRNM");
    expect(flags(nuovo.flags)).toBe(flags(new Set("LDRNM")));
    expect(nuovo.valueTemp).toBe("{user}");
    expect(nuovo.numCost).toBe(100);
    // Any other context, or none, falls back to the row without CENTER_DETT.
    expect(fieldConfig(rep, "modifica").codOnOff).toBe("LDRM");
    expect(fieldConfig(rep, null).codOnOff).toBe("LDRM");
    expect(fieldConfig(rep, undefined).flags.has("N")).toBe(false);
    // A field without context rows is the same in every context.
    const name = dim(model, "CUST").fieldsByCode.get("NAME")!;
    expect(fieldConfig(name, "nuovo")).toBe(name.config);
  });

  it("COD_ON_OFF patterns of the sample: read-only, detail-only, search-only, hidden", () => {
    const cust = dim(model, "CUST");
    expect(flags(cust.fieldsByCode.get("CUST_ID")!.config.flags)).toBe("DLR");
    expect(flags(cust.fieldsByCode.get("EMAIL")!.config.flags)).toBe("DMNR");
    expect(flags(cust.fieldsByCode.get("RISK_SCORE")!.config.flags)).toBe("R");
    expect(cust.fieldsByCode.get("INTERNAL")!.config.flags.size).toBe(0);
    expect(cust.fieldsByCode.get("NAME")!.config).toMatchObject({
      required: true,
      renderHint: "text",
      groupName: "main",
    });
  });

  it("weights: CREDIT_LIMIT has COD_UTENTE 2, others none", () => {
    const cust = dim(model, "CUST");
    expect(cust.fieldsByCode.get("CREDIT_LIMIT")!.config.codUtente).toBe(2);
    expect(cust.fieldsByCode.get("NAME")!.config.codUtente).toBeNull();
  });

  it("relations are named by the destination dimension, with the TB_OBJECT display field", () => {
    expect(dim(model, "CUST").relations).toEqual([
      {
        name: "CITY",
        fromDim: "CUST",
        fromField: "CITY_ID",
        toDim: "CITY",
        toField: "CITY_ID",
        descField: "NAME",
      },
    ]);
    expect(
      dim(model, "ORDL")
        .relations.map((r) => r.name)
        .sort(),
    ).toEqual(["ORD", "PROD"]);
    expect(dim(model, "ORDL").relations.find((r) => r.name === "ORD")!.descField).toBe("ORD_NO");
  });

  it("reverse relations are named by the child dimension's code", () => {
    const names = (d: string) =>
      dim(model, d)
        .reverseRelations.map((r) => r.name)
        .sort();
    expect(names("CUST")).toEqual(["ADDR", "ORD"]);
    expect(names("PROD")).toEqual(["ORDL", "PRICE"]);
    expect(names("CITY")).toEqual(["ADDR", "CUST"]);
    const ordl = dim(model, "ORD").reverseRelations[0]!;
    expect(ordl).toMatchObject({
      name: "ORDL",
      fromDim: "ORDL",
      fromField: "ORD_ID",
      toDim: "ORD",
      toField: "ORD_ID",
    });
  });

  it("foreign-key fields: kind and destination", () => {
    expect(dim(model, "CUST").fieldsByCode.get("CITY_ID")).toMatchObject({
      kind: "AC",
      fkKind: "AC",
      targetDim: "CITY",
    });
    expect(dim(model, "ADDR").fieldsByCode.get("CITY_ID")).toMatchObject({ fkKind: "VARS" });
    // Another TIPO_CAMPO is kept as written but is not a foreign key.
    expect(dim(model, "PROD").fieldsByCode.get("IMAGE")).toMatchObject({
      kind: "PUBLIC",
      fkKind: null,
      dataType: "MEDIA",
    });
  });

  it("sorts, menu (by NLEFT) and documents", () => {
    expect(dim(model, "ORD").sorts.get("latest")).toEqual({
      key: "latest",
      description: "Latest first",
      expr: "-ORD_DATE,-ORD_ID",
    });
    expect(model.menu.map((m) => m.code)[0]).toBe("erp");
    expect(model.menuByCode.get("anag-1")).toEqual({
      code: "anag-1",
      nleft: 3,
      nright: 4,
      description: "Customers",
      dim: "CUST",
    });
    expect(
      menuSubtree(model, "anag")
        .map((m) => m.code)
        .sort(),
    ).toEqual(["anag", "anag-1", "anag-2", "anag-3"]);
    expect(menuSubtree(model, "nope")).toEqual([]);
    expect(model.documents.get("listino")?.rootDim).toBe("PROD");
  });

  it("the model is immutable", () => {
    const cust = dim(model, "CUST");
    expect(Object.isFrozen(model)).toBe(true);
    expect(Object.isFrozen(cust)).toBe(true);
    expect(Object.isFrozen(cust.fields)).toBe(true);
    expect(Object.isFrozen(cust.fields[0])).toBe(true);
  });
});

describe("buildModel over hand-made rows", () => {
  const base = rows({
    TB_DIM: [
      { COD_DIM: "PARTY", TABLE_NAME: "TB_PARTY", ID_FIELD: "PARTY_ID" },
      { COD_DIM: "INV", TABLE_NAME: "TB_INV", ID_FIELD: "INV_ID", AUDIT_STYLE: "CREATED" },
      { COD_DIM: "TAG", TABLE_NAME: "TB_TAG", ID_FIELD: "TAG_CODE" },
    ],
    TB_VAR: [
      { COD_DIM: "PARTY", NUM_VAR: 1, COD_VAR: "PARTY_ID", DATA_TYPE: "int" },
      { COD_DIM: "PARTY", NUM_VAR: 3, COD_VAR: "LABEL", DATA_TYPE: "varchar", LENGTH: 40 },
      { COD_DIM: "PARTY", NUM_VAR: 2, COD_VAR: "CODE", DATA_TYPE: "Char", LENGTH: 5 },
      { COD_DIM: "PARTY", NUM_VAR: 4, COD_VAR: "SCORE", DATA_TYPE: "NUMERIC", LENGTH: 8, DECIMALS: 3 },
      { COD_DIM: "PARTY", NUM_VAR: 5, COD_VAR: "ACTIVE", DATA_TYPE: "bool" },
      { COD_DIM: "PARTY", NUM_VAR: 6, COD_VAR: "SEEN", DATA_TYPE: "DateTime" },
      { COD_DIM: "PARTY", NUM_VAR: 7, COD_VAR: "BIG", DATA_TYPE: "BIGINT" },
      { COD_DIM: "PARTY", NUM_VAR: 8, COD_VAR: "RATIO", DATA_TYPE: "float" },
      { COD_DIM: "PARTY", NUM_VAR: 9, COD_VAR: "AMOUNT", DATA_TYPE: "number" },
      { COD_DIM: "PARTY", NUM_VAR: 10, COD_VAR: "NOTE", DATA_TYPE: "text", NULLABLE: false },
      { COD_DIM: "INV", NUM_VAR: 1, COD_VAR: "INV_ID", DATA_TYPE: "INTEGER", NULLABLE: true },
      {
        COD_DIM: "INV",
        NUM_VAR: 2,
        COD_VAR: "BILL_TO",
        DATA_TYPE: "INTEGER",
        TIPO_CAMPO: "AC",
        TIPO_VAR: "PARTY",
      },
      {
        COD_DIM: "INV",
        NUM_VAR: 3,
        COD_VAR: "SHIP_TO",
        DATA_TYPE: "INTEGER",
        TIPO_CAMPO: "AC",
        TIPO_VAR: "PARTY",
      },
      {
        COD_DIM: "INV",
        NUM_VAR: 4,
        COD_VAR: "TAG",
        DATA_TYPE: "STRING",
        LENGTH: 10,
        TIPO_CAMPO: "VARS",
        TIPO_VAR: "TAG",
      },
      {
        COD_DIM: "INV",
        NUM_VAR: 5,
        COD_VAR: "SELLER",
        DATA_TYPE: "INTEGER",
        TIPO_CAMPO: "AC",
        TIPO_VAR: "PARTY",
      },
      { COD_DIM: "TAG", NUM_VAR: 1, COD_VAR: "TAG_CODE", DATA_TYPE: "STRING", LENGTH: 10 },
      { COD_DIM: "TAG", NUM_VAR: 2, COD_VAR: "WEIGHT", DATA_TYPE: "INTEGER" },
    ],
    TB_OBJECT: [
      { COD_DIM: "INV", COD_VAR: "BILL_TO", COD_DIM_OBJ: "PARTY", COD_VAR_OBJ: "PARTY_ID" },
      {
        COD_DIM: "INV",
        COD_VAR: "SHIP_TO",
        COD_DIM_OBJ: "PARTY",
        COD_VAR_OBJ: "PARTY_ID",
        COD_VAR_DESC: "LABEL",
      },
      {
        COD_DIM: "INV",
        COD_VAR: "SELLER",
        COD_DIM_OBJ: "PARTY",
        COD_VAR_OBJ: "PARTY_ID",
        REL_NAME: "vendor",
      },
    ],
    TB_COST: [{ COD_DIM: "PARTY", NUM_COST: 1, COD_VAR: "LABEL", COD_ON_OFF: "ldr", COD_UTENTE: 3 }],
  });
  const model = buildModel(base, 1);

  it("relation names that hide a field are refused (issue 8): the COD_VAR default, an AC field named like its destination", () => {
    expect(validateMetadata(base)).toEqual([
      {
        path: "TB_OBJECT[0].REL_NAME",
        message:
          "the relation name BILL_TO of INV.BILL_TO equals a field of INV; give the relation another REL_NAME",
      },
      {
        path: "TB_OBJECT[1].REL_NAME",
        message:
          "the relation name SHIP_TO of INV.SHIP_TO equals a field of INV; give the relation another REL_NAME",
      },
      {
        path: "TB_VAR INV.TAG",
        message: "the relation name TAG of INV.TAG equals a field of INV; give the relation another REL_NAME",
      },
    ]);
  });

  it("the hand-made rows are valid once those relations are named", () => {
    const named = structuredClone(base);
    named.TB_OBJECT[0]!.REL_NAME = "billTo";
    named.TB_OBJECT[1]!.REL_NAME = "shipTo";
    named.TB_OBJECT.push({
      COD_DIM: "INV",
      COD_VAR: "TAG",
      COD_DIM_OBJ: "TAG",
      COD_VAR_OBJ: "TAG_CODE",
      REL_NAME: "tag",
    });
    expect(validateMetadata(named)).toEqual([]);
  });

  it("a relation named like an audit field is refused", () => {
    const audit = structuredClone(base);
    audit.TB_OBJECT[2]!.REL_NAME = "UPDATED_BY";
    expect(validateMetadata(audit)).toContainEqual({
      path: "TB_OBJECT[2].REL_NAME",
      message:
        "the relation name UPDATED_BY of INV.SELLER equals a field of INV; give the relation another REL_NAME",
    });
  });

  it("data type synonyms, case-insensitive; the declared type is kept", () => {
    const party = dim(model, "PARTY");
    const t = (code: string) => party.fieldsByCode.get(code)!;
    expect(t("PARTY_ID").dataType).toBe("INTEGER");
    expect(t("PARTY_ID").declaredType).toBe("int");
    expect(t("LABEL").dataType).toBe("STRING");
    expect(t("CODE").dataType).toBe("STRING");
    expect(t("SCORE")).toMatchObject({ dataType: "DECIMAL", length: 8, decimals: 3 });
    expect(t("ACTIVE").dataType).toBe("BOOLEAN");
    expect(t("SEEN").dataType).toBe("TIMESTAMP");
    expect(t("BIG").dataType).toBe("INTEGER");
    expect(t("RATIO").dataType).toBe("DECIMAL");
    expect(t("AMOUNT").dataType).toBe("DECIMAL");
    expect(t("NOTE")).toMatchObject({ dataType: "TEXT", nullable: false });
    for (const [given, wanted] of [
      ["VARCHAR", "STRING"],
      ["char", "STRING"],
      ["Int", "INTEGER"],
      ["bigint", "INTEGER"],
      ["NUMBER", "DECIMAL"],
      ["numeric", "DECIMAL"],
      ["FLOAT", "DECIMAL"],
      ["Bool", "BOOLEAN"],
      ["datetime", "TIMESTAMP"],
      [" date ", "DATE"],
      ["json", "JSON"],
      ["media", "MEDIA"],
      ["string", "STRING"],
    ] as const) {
      expect(normalizeDataType(given)).toBe(wanted);
    }
    expect(normalizeDataType("BLOB")).toBeNull();
    expect(normalizeDataType("")).toBeNull();
  });

  it("fields without TB_COST rows: LDRNM, not required, no weight; the id LDR (INTEGER) or LDRN (STRING)", () => {
    const party = dim(model, "PARTY");
    const score = party.fieldsByCode.get("SCORE")!.config;
    expect(score).toMatchObject({
      numCost: null,
      codOnOff: "LDRNM",
      required: false,
      renderHint: null,
      groupName: null,
      valueTemp: null,
      codUtente: null,
    });
    expect(flags(score.flags)).toBe("DLMNR");
    expect(party.fieldsByCode.get("PARTY_ID")!.config.codOnOff).toBe("LDR");
    expect(dim(model, "TAG").fieldsByCode.get("TAG_CODE")!.config.codOnOff).toBe("LDRN");
    // A TB_COST row's lower-case letters count, and its weight is kept.
    const label = party.fieldsByCode.get("LABEL")!.config;
    expect(label.codOnOff).toBe("LDR");
    expect(flags(label.flags)).toBe("DLR");
    expect(label.codUtente).toBe(3);
  });

  it("the id field is never nullable, whatever TB_VAR says; decimals default to 2", () => {
    expect(dim(model, "INV").fieldsByCode.get("INV_ID")!.nullable).toBe(false);
    expect(dim(model, "PARTY").fieldsByCode.get("RATIO")!.decimals).toBe(2);
  });

  it("two relations of one dimension to the same destination are named by COD_VAR; REL_NAME overrides", () => {
    const rels = dim(model, "INV").relations;
    const byField = new Map(rels.map((r) => [r.fromField, r]));
    expect(byField.get("BILL_TO")!.name).toBe("BILL_TO");
    expect(byField.get("SHIP_TO")!.name).toBe("SHIP_TO");
    expect(byField.get("SELLER")!.name).toBe("vendor");
    // An AC/VARS field without a TB_OBJECT row leads to the destination's id field, named by it.
    expect(byField.get("TAG")).toMatchObject({ name: "TAG", toDim: "TAG", toField: "TAG_CODE" });
  });

  it("the default display field is the destination's first STRING field by NUM_VAR other than its key", () => {
    const byField = new Map(dim(model, "INV").relations.map((r) => [r.fromField, r]));
    expect(byField.get("BILL_TO")!.descField).toBe("CODE"); // NUM_VAR 2, listed after LABEL (3)
    expect(byField.get("SHIP_TO")!.descField).toBe("LABEL"); // COD_VAR_DESC wins
    expect(byField.get("TAG")!.descField).toBeNull(); // TAG has no STRING field but its key
  });

  it("reverse relations: by child code, or child_field when one child points here twice", () => {
    const names = dim(model, "PARTY")
      .reverseRelations.map((r) => r.name)
      .sort();
    expect(names).toEqual(["INV_BILL_TO", "INV_SELLER", "INV_SHIP_TO"]);
    expect(dim(model, "TAG").reverseRelations.map((r) => r.name)).toEqual(["INV"]);
  });

  it("audit fields of AUDIT_STYLE TREC (default) and CREATED", () => {
    const sys = (d: string) => dim(model, d).fields.filter((f) => f.system);
    expect(sys("PARTY").map((f) => f.code)).toEqual(["TREC", "CDATA", "OWNER", "LDATA", "LOWNER"]);
    expect(dim(model, "PARTY").auditStyle).toBe("TREC");
    expect(dim(model, "INV").auditStyle).toBe("CREATED");
    expect(sys("INV").map((f) => f.code)).toEqual([
      "TREC",
      "CREATED_BY",
      "CREATED_AT",
      "UPDATED_BY",
      "UPDATED_AT",
      "DELETED_BY",
      "DELETED_AT",
    ]);
    const byCode = dim(model, "INV").fieldsByCode;
    expect(byCode.get("TREC")).toMatchObject({ dataType: "STRING", length: 1, nullable: false });
    expect(byCode.get("CREATED_AT")).toMatchObject({ dataType: "TIMESTAMP", length: 14, nullable: true });
    expect(byCode.get("CREATED_BY")).toMatchObject({ dataType: "STRING", length: 100 });
    // Readable, searchable, never writable; after the TB_VAR fields.
    for (const f of sys("INV")) {
      expect(flags(f.config.flags)).toBe("DLR");
      expect(f.numVar).toBeGreaterThan(5);
    }
    expect(byCode.has("CDATA")).toBe(false);
    expect(byCode.has("TENANT_ID")).toBe(false);
  });
});

describe("validateMetadata lists every problem with its path", () => {
  it("unknown DATA_TYPE, TB_COST for a missing field, a TB_OBJECT to a missing dimension, overlapping menus", () => {
    const r = rows({
      TB_DIM: [{ COD_DIM: "A", TABLE_NAME: "TB_A", ID_FIELD: "A_ID" }],
      TB_VAR: [
        { COD_DIM: "A", NUM_VAR: 1, COD_VAR: "A_ID", DATA_TYPE: "INTEGER" },
        { COD_DIM: "A", NUM_VAR: 2, COD_VAR: "X", DATA_TYPE: "BLOB" },
      ],
      TB_COST: [{ COD_DIM: "A", NUM_COST: 1, COD_VAR: "NOPE", COD_ON_OFF: "LDR" }],
      TB_OBJECT: [{ COD_DIM: "A", COD_VAR: "X", COD_DIM_OBJ: "GHOST", COD_VAR_OBJ: "G_ID" }],
      TB_MENU: [
        { COD_MENU: "m1", NLEFT: 1, NRIGHT: 4 },
        { COD_MENU: "m2", NLEFT: 3, NRIGHT: 6 },
      ],
    });
    const problems = validateMetadata(r);
    expect(problems.map((p) => p.path).sort()).toEqual(
      ["TB_VAR[1].DATA_TYPE", "TB_COST[0].COD_VAR", "TB_OBJECT[0].COD_DIM_OBJ", "TB_MENU[1]"].sort(),
    );
    expect(problems.find((p) => p.path === "TB_VAR[1].DATA_TYPE")!.message).toContain("BLOB");
  });

  it("reserved codes, invalid identifiers, duplicate tables, system field names", () => {
    const r = rows({
      TB_DIM: [
        { COD_DIM: "DIM", TABLE_NAME: "TB_X", ID_FIELD: "ID" },
        { COD_DIM: "B", TABLE_NAME: "TB_X", ID_FIELD: "ID" },
        { COD_DIM: "C", TABLE_NAME: "TB_USER", ID_FIELD: "ID" },
        { COD_DIM: "bad code", TABLE_NAME: "x; DROP", ID_FIELD: "ID" },
      ],
      TB_VAR: [
        { COD_DIM: "B", NUM_VAR: 1, COD_VAR: "ID", DATA_TYPE: "INTEGER" },
        { COD_DIM: "B", NUM_VAR: 2, COD_VAR: "TENANT_ID", DATA_TYPE: "STRING" },
        { COD_DIM: "C", NUM_VAR: 1, COD_VAR: "ID", DATA_TYPE: "BOOLEAN" },
      ],
    });
    const paths = validateMetadata(r).map((p) => p.path);
    expect(paths).toContain("TB_DIM[0].COD_DIM");
    expect(paths).toContain("TB_DIM[1].TABLE_NAME");
    expect(paths).toContain("TB_DIM[2].TABLE_NAME");
    expect(paths).toContain("TB_DIM[3].COD_DIM");
    expect(paths).toContain("TB_DIM[3].TABLE_NAME");
    expect(paths).toContain("TB_VAR[1].COD_VAR");
    expect(paths).toContain("TB_DIM[2].ID_FIELD");
  });
});
