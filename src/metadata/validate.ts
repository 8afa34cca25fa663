// Checks metadata rows against the rules of the spec and decisions.md §2-3, listing every
// problem. Used by the fixture importer and by metadata writes, before anything is written.
import { isValidIdentifier } from "../db/sql.ts";
import type { MetadataRows, Problem } from "../types.ts";
import { graphqlNameProblems } from "../schema/names.ts";
import { resolveRelations } from "./build.ts";
import { rowScopeProblems } from "./row-scope.ts";
import { compositeIndexProblems } from "./composite-indexes.ts";
import { documentDefinitionProblems } from "./document-definition.ts";
import {
  AUDIT_FIELDS,
  FIXED_TABLES,
  METADATA_DIMENSIONS,
  normalizeDataType,
  RESERVED_COLUMNS,
  SYSTEM_COLUMNS,
} from "./data-types.ts";
import { parseTemplate, TemplateSyntaxError, templateTypeProblem } from "./template.ts";
import { parseValidationRule } from "./validation-rules.ts";

const DIM_CODE_MAX = 30;

/** The peso levels (spec 2.6, 5.8.6: 1 admin, 2 manager, 3 user), which a COD_UTENTE weight is one of. */
const PESO_LEVELS: readonly unknown[] = [1, 2, 3];

/**
 * Whether `code` is a member every plain object inherits (constructor, toString, valueOf,
 * hasOwnProperty, __proto__, ...). Codes become keys of records, bodies and values: a field named
 * `constructor` would read as Object.prototype.constructor wherever a body omits it. Codes are
 * case-sensitive, as JavaScript's names are: CONSTRUCTOR is another name.
 */
export function isInheritedName(code: string): boolean {
  return Object.hasOwn(Object.prototype, code);
}

const inheritedNameMessage = (code: string, what: string) =>
  `"${code}" is the name of an Object.prototype member, which every JSON object inherits; choose another ${what}`;

function splitCodes(list: string | null | undefined): string[] {
  return (list ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

/** Column widths of the metadata tables (prisma/migrations/0001_init). */
const MAX_LENGTHS: { [T in keyof MetadataRows]: Record<string, number> } = {
  TB_DIM: {
    COD_DIM: 30,
    DESC_DIM: 200,
    TABLE_NAME: 60,
    ID_FIELD: 60,
    CASCADE_DELETE: 500,
    INSERT_CASCADE: 500,
    UPDATE_CASCADE: 500,
    AUDIT_STYLE: 10,
    INDEXES: 1000,
    ROW_SCOPE: 100,
  },
  TB_VAR: { COD_DIM: 30, COD_VAR: 60, DESC_VAR: 200, DATA_TYPE: 20, TIPO_CAMPO: 20, TIPO_VAR: 30 },
  TB_COST: {
    COD_DIM: 30,
    COD_VAR: 60,
    COD_ON_OFF: 10,
    RENDER_HINT: 50,
    GROUP_NAME: 50,
    VALUE_TEMP: 500,
    CENTER_DETT: 50,
  },
  TB_OBJECT: { COD_DIM: 30, COD_VAR: 60, COD_DIM_OBJ: 30, COD_VAR_OBJ: 60, REL_NAME: 60, COD_VAR_DESC: 60 },
  TB_MENU: { COD_MENU: 60, DESC_MENU: 200, COD_DIM: 30 },
  TB_SORT: { COD_DIM: 30, SORT_KEY: 60, DESC_SORT: 200, SORT_EXPR: 500 },
  TB_DOCUMENT: { DOC_NAME: 60, COD_DIM: 30 },
};

function checkLengths(rows: MetadataRows, add: (path: string, message: string) => void): void {
  for (const table of Object.keys(MAX_LENGTHS) as Array<keyof MetadataRows>) {
    const limits = MAX_LENGTHS[table];
    (rows[table] as unknown as Array<Record<string, unknown>>).forEach((row, i) => {
      for (const [column, max] of Object.entries(limits)) {
        const v = row[column];
        if (typeof v === "string" && v.length > max)
          add(`${table}[${i}].${column}`, `is ${v.length} characters long; at most ${max}`);
      }
    });
  }
}

export function validateMetadata(rows: MetadataRows): Problem[] {
  const problems: Problem[] = [];
  const add = (path: string, message: string, code?: string) =>
    problems.push(code ? { path, message, code } : { path, message });
  /** A name the service or PostgreSQL keeps for itself (400 RESERVED_NAME when alone). */
  const reserved = (path: string, message: string) => add(path, message, "RESERVED_NAME");
  const fixedTables = new Set([...FIXED_TABLES].map((t) => t.toUpperCase()));
  checkLengths(rows, add);

  // ---- TB_DIM
  const dims = new Map<string, MetadataRows["TB_DIM"][number]>();
  const tables = new Set<string>();
  rows.TB_DIM.forEach((d, i) => {
    const p = `TB_DIM[${i}]`;
    if (!isValidIdentifier(d.COD_DIM, DIM_CODE_MAX)) {
      add(
        `${p}.COD_DIM`,
        `"${d.COD_DIM}" is not a valid code (letters, digits, underscore; up to ${DIM_CODE_MAX})`,
      );
    } else if (isInheritedName(d.COD_DIM)) {
      reserved(`${p}.COD_DIM`, inheritedNameMessage(d.COD_DIM, "code"));
    } else if (
      METADATA_DIMENSIONS.has(d.COD_DIM) ||
      d.COD_DIM.toLowerCase() === "vars" ||
      d.COD_DIM === "batch"
    ) {
      reserved(`${p}.COD_DIM`, `"${d.COD_DIM}" is reserved for an endpoint`);
    }
    if (dims.has(d.COD_DIM)) add(`${p}.COD_DIM`, `duplicate dimension ${d.COD_DIM}`);
    dims.set(d.COD_DIM, d);
    if (!isValidIdentifier(d.TABLE_NAME))
      add(`${p}.TABLE_NAME`, `"${d.TABLE_NAME}" is not a valid table name`);
    else if (fixedTables.has(d.TABLE_NAME.toUpperCase()) || d.TABLE_NAME.startsWith("_"))
      reserved(`${p}.TABLE_NAME`, `"${d.TABLE_NAME}" is a table of the service itself`);
    else if (d.TABLE_NAME.toLowerCase().startsWith("pg_"))
      reserved(
        `${p}.TABLE_NAME`,
        `"${d.TABLE_NAME}" starts with pg_, which is reserved for PostgreSQL's catalogs`,
      );
    if (tables.has(d.TABLE_NAME)) add(`${p}.TABLE_NAME`, `table ${d.TABLE_NAME} is used by two dimensions`);
    tables.add(d.TABLE_NAME);
    if (d.AUDIT_STYLE != null && !["TREC", "CREATED"].includes(d.AUDIT_STYLE))
      add(`${p}.AUDIT_STYLE`, `must be TREC or CREATED, got "${d.AUDIT_STYLE}"`);
  });
  rows.TB_DIM.forEach((d, i) => {
    for (const col of ["CASCADE_DELETE", "INSERT_CASCADE", "UPDATE_CASCADE"] as const) {
      for (const code of splitCodes(d[col])) {
        if (!dims.has(code)) add(`TB_DIM[${i}].${col}`, `names dimension ${code}, which does not exist`);
      }
    }
  });

  // ---- TB_VAR
  const vars = new Map<string, Map<string, MetadataRows["TB_VAR"][number]>>();
  /** The field holding each NUM_VAR, per dimension: NUM_VAR orders the fields, so two may not share one. */
  const numbers = new Map<string, Map<number, string>>();
  rows.TB_VAR.forEach((v, i) => {
    const p = `TB_VAR[${i}]`;
    if (!dims.has(v.COD_DIM)) add(`${p}.COD_DIM`, `dimension ${v.COD_DIM} does not exist in TB_DIM`);
    if (!isValidIdentifier(v.COD_VAR)) add(`${p}.COD_VAR`, `"${v.COD_VAR}" is not a valid field code`);
    const indexedType = normalizeDataType(v.DATA_TYPE);
    if (v.INDEXED === true && (indexedType === "TEXT" || indexedType === "JSON" || indexedType === "MEDIA"))
      add(`${p}.INDEXED`, `${indexedType} fields cannot be INDEXED (values may exceed an index entry)`);
    if (isValidIdentifier(v.COD_VAR) && isInheritedName(v.COD_VAR))
      reserved(`${p}.COD_VAR`, inheritedNameMessage(v.COD_VAR, "code"));
    else if (typeof v.COD_VAR === "string" && RESERVED_COLUMNS.has(v.COD_VAR.toUpperCase()))
      reserved(`${p}.COD_VAR`, `"${v.COD_VAR}" is a system field (audit or tenant) and cannot be declared`);
    else if (SYSTEM_COLUMNS.has(v.COD_VAR))
      reserved(
        `${p}.COD_VAR`,
        `"${v.COD_VAR}" is a system column of every PostgreSQL table (${[...SYSTEM_COLUMNS].join(", ")}); choose another code`,
      );
    const byDim = vars.get(v.COD_DIM) ?? new Map();
    if (byDim.has(v.COD_VAR)) add(`${p}.COD_VAR`, `duplicate field ${v.COD_DIM}.${v.COD_VAR}`);
    byDim.set(v.COD_VAR, v);
    vars.set(v.COD_DIM, byDim);
    if (!Number.isInteger(v.NUM_VAR)) add(`${p}.NUM_VAR`, "must be an integer");
    else {
      const byNumber = numbers.get(v.COD_DIM) ?? new Map<number, string>();
      const holder = byNumber.get(v.NUM_VAR);
      if (holder !== undefined && holder !== v.COD_VAR)
        add(
          `${p}.NUM_VAR`,
          `${v.COD_DIM}.${holder} and ${v.COD_DIM}.${v.COD_VAR} both have NUM_VAR ${v.NUM_VAR}; NUM_VAR orders a dimension's fields, so each field needs its own`,
        );
      else byNumber.set(v.NUM_VAR, v.COD_VAR);
      numbers.set(v.COD_DIM, byNumber);
    }
    const type = typeof v.DATA_TYPE === "string" ? normalizeDataType(v.DATA_TYPE) : null;
    if (!type) add(`${p}.DATA_TYPE`, `unknown DATA_TYPE "${v.DATA_TYPE}"`);
    if (v.LENGTH != null && (!Number.isInteger(v.LENGTH) || v.LENGTH < 1 || v.LENGTH > 10485760))
      add(`${p}.LENGTH`, "must be a positive integer");
    if (type === "DECIMAL") {
      const precision = v.LENGTH ?? 18;
      const scale = v.DECIMALS ?? 2;
      if (precision > 1000) add(`${p}.LENGTH`, "DECIMAL precision must be at most 1000");
      if (!Number.isInteger(scale) || scale < 0 || scale > precision)
        add(`${p}.DECIMALS`, `must be an integer between 0 and LENGTH (${precision})`);
    }
    if (v.TIPO_CAMPO === "AC" || v.TIPO_CAMPO === "VARS") {
      if (!v.TIPO_VAR)
        add(`${p}.TIPO_VAR`, `a ${v.TIPO_CAMPO} field needs TIPO_VAR (its destination dimension)`);
      else if (!dims.has(v.TIPO_VAR))
        add(`${p}.TIPO_VAR`, `destination dimension ${v.TIPO_VAR} does not exist`);
    }
  });
  rows.TB_DIM.forEach((d, i) => {
    const idVar = vars.get(d.COD_DIM)?.get(d.ID_FIELD);
    if (!idVar) add(`TB_DIM[${i}].ID_FIELD`, `${d.ID_FIELD} has no TB_VAR row in ${d.COD_DIM}`);
    else {
      const t = normalizeDataType(idVar.DATA_TYPE);
      if (t && t !== "INTEGER" && t !== "STRING")
        add(
          `TB_DIM[${i}].ID_FIELD`,
          `the id field must be INTEGER or STRING, ${d.ID_FIELD} is ${idVar.DATA_TYPE}`,
        );
    }
  });
  const fieldExists = (dim: string, field: string) =>
    vars.get(dim)?.has(field) === true || RESERVED_COLUMNS.has(field);
  /** A TB_COST or TB_OBJECT row's COD_DIM is in TB_DIM and its COD_VAR in TB_VAR (audit fields are not). */
  const checkField = (p: string, row: { COD_DIM: string; COD_VAR: string }) => {
    if (!dims.has(row.COD_DIM)) add(`${p}.COD_DIM`, `dimension ${row.COD_DIM} does not exist in TB_DIM`);
    else if (!vars.get(row.COD_DIM)?.has(row.COD_VAR))
      add(`${p}.COD_VAR`, `field ${row.COD_DIM}.${row.COD_VAR} does not exist in TB_VAR`);
  };

  // ---- TB_COST
  const costKeys = new Set<string>();
  const costContexts = new Set<string>();
  rows.TB_COST.forEach((c, i) => {
    const p = `TB_COST[${i}]`;
    checkField(p, c);
    const key = `${c.COD_DIM}/${c.NUM_COST}`;
    if (costKeys.has(key)) add(`${p}.NUM_COST`, `duplicate NUM_COST ${c.NUM_COST} in ${c.COD_DIM}`);
    costKeys.add(key);
    const ctxKey = `${c.COD_DIM}/${c.COD_VAR}/${c.CENTER_DETT ?? ""}`;
    if (costContexts.has(ctxKey))
      add(
        `${p}.COD_VAR`,
        `two TB_COST rows for ${c.COD_DIM}.${c.COD_VAR} in context ${c.CENTER_DETT ?? "(all)"}`,
      );
    costContexts.add(ctxKey);
    if (c.COD_ON_OFF != null && !/^[LDNMR]*$/i.test(c.COD_ON_OFF))
      add(`${p}.COD_ON_OFF`, `"${c.COD_ON_OFF}" has letters other than L, D, N, M, R`);
    const costVar = vars.get(c.COD_DIM)?.get(c.COD_VAR);
    const costType =
      costVar && typeof costVar.DATA_TYPE === "string" ? normalizeDataType(costVar.DATA_TYPE) : null;
    for (const problem of parseValidationRule(c.VALIDATION, costType).problems)
      add(`${p}.VALIDATION`, problem);
    // A weight is a peso level (spec 5.8.6; users' peso is 1, 2 or 3): the field is seen by callers
    // of that peso or a lower one. 0 would hide it from everyone, 4 and above from no one.
    if (c.COD_UTENTE != null && !PESO_LEVELS.includes(c.COD_UTENTE))
      add(
        `${p}.COD_UTENTE`,
        `${JSON.stringify(c.COD_UTENTE)} is no peso level: give 1 (admin), 2 (manager) or 3 (user) for a field seen by that peso and the lower ones, or null for no weight (${c.COD_DIM}.${c.COD_VAR})`,
      );
    if (c.VALUE_TEMP) {
      try {
        const parts = parseTemplate(c.VALUE_TEMP);
        for (const part of parts) {
          if (part.kind === "field" && !vars.get(c.COD_DIM)?.has(part.field))
            add(`${p}.VALUE_TEMP`, `{field:${part.field}} names a field not in ${c.COD_DIM}`);
        }
        const mismatch = costType ? templateTypeProblem(parts, costType) : null;
        if (mismatch) add(`${p}.VALUE_TEMP`, mismatch);
      } catch (err) {
        if (err instanceof TemplateSyntaxError) add(`${p}.VALUE_TEMP`, err.message);
        else throw err;
      }
    }
  });

  // ---- TB_OBJECT
  const objectKeys = new Set<string>();
  rows.TB_OBJECT.forEach((o, i) => {
    const p = `TB_OBJECT[${i}]`;
    checkField(p, o);
    if (!dims.has(o.COD_DIM_OBJ))
      add(`${p}.COD_DIM_OBJ`, `destination dimension ${o.COD_DIM_OBJ} does not exist`);
    else {
      if (!vars.get(o.COD_DIM_OBJ)?.has(o.COD_VAR_OBJ))
        add(`${p}.COD_VAR_OBJ`, `field ${o.COD_DIM_OBJ}.${o.COD_VAR_OBJ} does not exist in TB_VAR`);
      if (o.COD_VAR_DESC && !fieldExists(o.COD_DIM_OBJ, o.COD_VAR_DESC))
        add(`${p}.COD_VAR_DESC`, `field ${o.COD_DIM_OBJ}.${o.COD_VAR_DESC} does not exist`);
    }
    if (o.REL_NAME != null && !isValidIdentifier(o.REL_NAME))
      add(`${p}.REL_NAME`, `"${o.REL_NAME}" is not a valid name`);
    else if (o.REL_NAME != null && isInheritedName(o.REL_NAME))
      reserved(`${p}.REL_NAME`, inheritedNameMessage(o.REL_NAME, "REL_NAME"));
    const key = `${o.COD_DIM}/${o.COD_VAR}`;
    if (objectKeys.has(key)) add(`${p}.COD_VAR`, `two TB_OBJECT rows for ${key}`);
    objectKeys.add(key);
  });

  // A relation's name is a key of the records it is expanded into: it may not hide a field.
  for (const rel of resolveRelations(rows)) {
    const dim = rows.TB_DIM.find((d) => d.COD_DIM === rel.fromDim);
    if (!dim) continue;
    // A key holds its target's key: a STRING field cannot name an INTEGER id (every value would
    // be refused as naming no record), nor the other way round.
    const fromVar = vars.get(rel.fromDim)?.get(rel.fromField);
    const toVar = vars.get(rel.toDim)?.get(rel.toField);
    const fromType = typeof fromVar?.DATA_TYPE === "string" ? normalizeDataType(fromVar.DATA_TYPE) : null;
    const toType = typeof toVar?.DATA_TYPE === "string" ? normalizeDataType(toVar.DATA_TYPE) : null;
    if (fromType && toType && fromType !== toType) {
      const i = rows.TB_VAR.findIndex((v) => v.COD_DIM === rel.fromDim && v.COD_VAR === rel.fromField);
      add(
        `TB_VAR[${i}].DATA_TYPE`,
        `${rel.fromDim}.${rel.fromField} is ${fromType} but names ${rel.toDim}.${rel.toField}, which is ${toType}; a key must have its target's type`,
      );
    }
    const audit = AUDIT_FIELDS[dim.AUDIT_STYLE === "CREATED" ? "CREATED" : "TREC"].map((a) => a.code);
    if (vars.get(rel.fromDim)?.has(rel.name) || audit.includes(rel.name)) {
      const i = rows.TB_OBJECT.findIndex((o) => o.COD_DIM === rel.fromDim && o.COD_VAR === rel.fromField);
      add(
        i >= 0 ? `TB_OBJECT[${i}].REL_NAME` : `TB_VAR ${rel.fromDim}.${rel.fromField}`,
        `the relation name ${rel.name} of ${rel.fromDim}.${rel.fromField} equals a field of ${rel.fromDim}; give the relation another REL_NAME`,
      );
    }
  }

  // TB_DIM.INDEXES names fields of its dimension that can be indexed.
  for (const p of compositeIndexProblems(rows)) add(p.path, p.message);

  // TB_DIM.ROW_SCOPE names known scope keys, each once (decisions.md §17).
  for (const p of rowScopeProblems(rows)) add(p.path, p.message);

  // The GraphQL schema uses the codes verbatim: they may not collide with its generated names.
  for (const p of graphqlNameProblems(rows)) add(p.path, p.message, p.code);

  // ---- TB_MENU (nested sets must nest: two nodes are disjoint or one holds the other)
  const menuCodes = new Set<string>();
  rows.TB_MENU.forEach((m, i) => {
    const p = `TB_MENU[${i}]`;
    if (typeof m.COD_MENU !== "string" || !/^[A-Za-z0-9_.-]{1,60}$/.test(m.COD_MENU))
      add(`${p}.COD_MENU`, `"${m.COD_MENU}" is not a valid menu code`);
    if (menuCodes.has(m.COD_MENU)) add(`${p}.COD_MENU`, `duplicate menu ${m.COD_MENU}`);
    menuCodes.add(m.COD_MENU);
    if (!Number.isInteger(m.NLEFT) || !Number.isInteger(m.NRIGHT) || m.NLEFT >= m.NRIGHT)
      add(`${p}.NLEFT`, `NLEFT (${m.NLEFT}) must be an integer below NRIGHT (${m.NRIGHT})`);
    if (m.COD_DIM && !dims.has(m.COD_DIM)) add(`${p}.COD_DIM`, `dimension ${m.COD_DIM} does not exist`);
  });
  for (let i = 0; i < rows.TB_MENU.length; i++) {
    for (let j = i + 1; j < rows.TB_MENU.length; j++) {
      const a = rows.TB_MENU[i]!;
      const b = rows.TB_MENU[j]!;
      const disjoint = a.NRIGHT < b.NLEFT || b.NRIGHT < a.NLEFT;
      const aHoldsB = a.NLEFT < b.NLEFT && b.NRIGHT < a.NRIGHT;
      const bHoldsA = b.NLEFT < a.NLEFT && a.NRIGHT < b.NRIGHT;
      if (!disjoint && !aHoldsB && !bHoldsA)
        add(
          `TB_MENU[${j}]`,
          `${b.COD_MENU} [${b.NLEFT},${b.NRIGHT}] overlaps ${a.COD_MENU} [${a.NLEFT},${a.NRIGHT}] without nesting`,
        );
    }
  }

  // ---- TB_SORT
  rows.TB_SORT.forEach((s, i) => {
    const p = `TB_SORT[${i}]`;
    if (!dims.has(s.COD_DIM)) add(`${p}.COD_DIM`, `dimension ${s.COD_DIM} does not exist`);
    if (typeof s.SORT_KEY !== "string" || !/^[A-Za-z0-9_-]{1,60}$/.test(s.SORT_KEY))
      add(`${p}.SORT_KEY`, `"${s.SORT_KEY}" is not a valid sort key`);
    for (const term of (s.SORT_EXPR ?? "").split(",")) {
      const field = term.trim().replace(/^-/, "");
      if (!field || (dims.has(s.COD_DIM) && !fieldExists(s.COD_DIM, field)))
        add(`${p}.SORT_EXPR`, `"${term.trim()}" is not a field of ${s.COD_DIM}`);
    }
  });

  // ---- TB_DOCUMENT
  rows.TB_DOCUMENT.forEach((d, i) => {
    const p = `TB_DOCUMENT[${i}]`;
    if (typeof d.DOC_NAME !== "string" || !/^[A-Za-z0-9_-]{1,60}$/.test(d.DOC_NAME))
      add(`${p}.DOC_NAME`, `"${d.DOC_NAME}" is not a valid document name`);
    if (!dims.has(d.COD_DIM)) add(`${p}.COD_DIM`, `dimension ${d.COD_DIM} does not exist`);
    if (d.DEFINITION === null || typeof d.DEFINITION !== "object" || Array.isArray(d.DEFINITION))
      add(`${p}.DEFINITION`, "must be a JSON object");
    else if (dims.has(d.COD_DIM)) {
      const problems = documentDefinitionProblems(
        d.DEFINITION,
        d.COD_DIM,
        (dim) => dims.has(dim),
        fieldExists,
      );
      for (const [at, message] of problems) add(`${p}.${at}`, message);
    }
  });

  return problems;
}
