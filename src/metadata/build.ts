// Turns validated metadata rows into the immutable MetadataModel: fields with their per-context
// configurations, relations with names (decisions.md §2), sorts, menu and documents.
import type {
  AuditStyle,
  DataType,
  DimensionDef,
  DocumentDef,
  FieldConfig,
  FieldDef,
  MenuNode,
  MetadataModel,
  MetadataRows,
  NamedRelation,
  Relation,
  SortDef,
} from "../types.ts";
import { createViewCache } from "../auth/view-cache.ts";
import { parseCompositeIndexes } from "./composite-indexes.ts";
import { AUDIT_FIELDS, DEFAULT_DECIMALS, normalizeDataType, parseFlags } from "./data-types.ts";
import { parseRowScope } from "./row-scope.ts";
import { compileRule, parseValidationRule } from "./validation-rules.ts";

type CostRow = MetadataRows["TB_COST"][number];

function configFromCost(c: CostRow, dataType: DataType): FieldConfig {
  const codOnOff = (c.COD_ON_OFF ?? "").toUpperCase();
  return Object.freeze({
    numCost: c.NUM_COST,
    codOnOff,
    flags: parseFlags(codOnOff),
    required: c.REQUIRED === true,
    renderHint: c.RENDER_HINT ?? null,
    groupName: c.GROUP_NAME ?? null,
    valueTemp: c.VALUE_TEMP ?? null,
    codUtente: c.COD_UTENTE ?? null,
    // Validated when written (validate.ts): a rule that does not parse here is none.
    validation: compileRule(parseValidationRule(c.VALIDATION, dataType).rule),
    validationSource: c.VALIDATION ?? null,
  });
}

/** A field with no TB_COST row is fully usable (a fixture may give only TB_DIM and TB_VAR). */
function defaultConfig(codOnOff: string): FieldConfig {
  return Object.freeze({
    numCost: null,
    codOnOff,
    flags: parseFlags(codOnOff),
    required: false,
    renderHint: null,
    groupName: null,
    valueTemp: null,
    codUtente: null,
    validation: null,
    validationSource: null,
  });
}

const SYSTEM_CONFIG = defaultConfig("LDR");
/** CENTRO_DETT and AMBIENTE columns: as long as TB_USER's. */
const ROW_SCOPE_COLUMN_LENGTH = 50;

/** A column the system sets (audit fields, row scope columns): listed and read, never written. */
function systemField(dim: string, code: string, type: DataType, length: number, numVar: number): FieldDef {
  return Object.freeze({
    dim,
    code,
    numVar,
    description: null,
    dataType: type,
    declaredType: type,
    length,
    decimals: 0,
    nullable: code !== "TREC",
    indexed: false,
    kind: null,
    fkKind: null,
    targetDim: null,
    isId: false,
    system: true,
    config: SYSTEM_CONFIG,
    contextConfigs: new Map(),
  } satisfies FieldDef);
}

/** A relation as seen from its dimension at the `direction` end. */
function seenFrom(relation: Relation, direction: NamedRelation["direction"]): NamedRelation {
  const forward = direction === "forward";
  return {
    relation,
    direction,
    target: forward ? relation.toDim : relation.fromDim,
    parentKey: forward ? relation.fromField : relation.toField,
    targetKey: forward ? relation.toField : relation.fromField,
  };
}

/** A dimension's relations by the name each has there; a forward name wins over a reverse one. */
function relationsByName(
  forward: readonly Relation[],
  reverse: readonly Relation[],
): ReadonlyMap<string, NamedRelation> {
  return new Map([
    ...reverse.map((r) => [r.name, seenFrom(r, "reverse")] as const),
    ...forward.map((r) => [r.name, seenFrom(r, "forward")] as const),
  ]);
}

function splitCodes(list: string | null | undefined): string[] {
  return (list ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
}

export function buildModel(rows: MetadataRows, version: number): MetadataModel {
  const costsByField = new Map<string, CostRow[]>();
  for (const c of rows.TB_COST) {
    const key = `${c.COD_DIM}/${c.COD_VAR}`;
    const list = costsByField.get(key) ?? [];
    list.push(c);
    costsByField.set(key, list);
  }

  const dimRows = new Map(rows.TB_DIM.map((d) => [d.COD_DIM, d]));
  const relations = resolveRelations(rows);
  // Default display field of a destination: its first STRING field by NUM_VAR other than its key.
  const displayField = (dim: string): string | null => {
    const d = dimRows.get(dim);
    const candidates = rows.TB_VAR.filter(
      (v) => v.COD_DIM === dim && v.COD_VAR !== d?.ID_FIELD && normalizeDataType(v.DATA_TYPE) === "STRING",
    ).sort((a, b) => a.NUM_VAR - b.NUM_VAR);
    return candidates[0]?.COD_VAR ?? null;
  };

  const dimensions = new Map<string, DimensionDef>();
  for (const d of rows.TB_DIM) {
    const auditStyle: AuditStyle = d.AUDIT_STYLE === "CREATED" ? "CREATED" : "TREC";
    const fields: FieldDef[] = rows.TB_VAR.filter((v) => v.COD_DIM === d.COD_DIM)
      .sort((a, b) => a.NUM_VAR - b.NUM_VAR)
      .map((v) => {
        const dataType = normalizeDataType(v.DATA_TYPE) ?? "STRING";
        const isId = v.COD_VAR === d.ID_FIELD;
        const costs = costsByField.get(`${d.COD_DIM}/${v.COD_VAR}`) ?? [];
        const base = costs.find((c) => c.CENTER_DETT == null);
        const idDefault = dataType === "INTEGER" ? "LDR" : "LDRN";
        const contextConfigs = new Map<string, FieldConfig>();
        for (const c of costs)
          if (c.CENTER_DETT != null) contextConfigs.set(c.CENTER_DETT, configFromCost(c, dataType));
        const fkKind = v.TIPO_CAMPO === "AC" || v.TIPO_CAMPO === "VARS" ? v.TIPO_CAMPO : null;
        return Object.freeze({
          dim: d.COD_DIM,
          code: v.COD_VAR,
          numVar: v.NUM_VAR,
          description: v.DESC_VAR ?? null,
          dataType,
          declaredType: v.DATA_TYPE,
          length: v.LENGTH ?? null,
          decimals: v.DECIMALS ?? DEFAULT_DECIMALS,
          nullable: isId ? false : v.NULLABLE !== false,
          indexed: v.INDEXED === true,
          kind: v.TIPO_CAMPO ?? null,
          fkKind,
          targetDim: v.TIPO_VAR ?? null,
          isId,
          system: false,
          config: base ? configFromCost(base, dataType) : defaultConfig(isId ? idDefault : "LDRNM"),
          contextConfigs,
        } satisfies FieldDef);
      });
    for (const a of AUDIT_FIELDS[auditStyle]) {
      fields.push(systemField(d.COD_DIM, a.code, a.type, a.length, 10_000 + fields.length));
    }
    const rowScope = parseRowScope(d.ROW_SCOPE, auditStyle);
    for (const k of rowScope) {
      if (k.key === "owner") continue;
      fields.push(
        systemField(d.COD_DIM, k.column, "STRING", ROW_SCOPE_COLUMN_LENGTH, 10_000 + fields.length),
      );
    }
    // The scope's index (TENANT_ID, scope columns…, id): every scoped read filters on them.
    const declaredIndexes = parseCompositeIndexes(d.INDEXES);
    const scopeColumns = rowScope.map((k) => k.column);
    const compositeIndexes =
      scopeColumns.length && !declaredIndexes.some((ix) => ix.join(",") === scopeColumns.join(","))
        ? [...declaredIndexes, scopeColumns]
        : declaredIndexes;
    const idVar = rows.TB_VAR.find((v) => v.COD_DIM === d.COD_DIM && v.COD_VAR === d.ID_FIELD);
    const sorts = new Map<string, SortDef>();
    for (const s of rows.TB_SORT.filter((s) => s.COD_DIM === d.COD_DIM)) {
      sorts.set(
        s.SORT_KEY,
        Object.freeze({ key: s.SORT_KEY, description: s.DESC_SORT ?? null, expr: s.SORT_EXPR }),
      );
    }
    const forward = relations
      .filter((r) => r.fromDim === d.COD_DIM)
      .map((r) => (r.descField ? r : Object.freeze({ ...r, descField: displayField(r.toDim) })));
    const reverseRaw = relations.filter((r) => r.toDim === d.COD_DIM);
    const reverse = reverseRaw.map((r) => {
      const siblings = reverseRaw.filter((o) => o.fromDim === r.fromDim).length;
      return Object.freeze({ ...r, name: siblings === 1 ? r.fromDim : `${r.fromDim}_${r.fromField}` });
    });
    dimensions.set(
      d.COD_DIM,
      Object.freeze({
        code: d.COD_DIM,
        description: d.DESC_DIM ?? null,
        tableName: d.TABLE_NAME,
        idField: d.ID_FIELD,
        idType: idVar && normalizeDataType(idVar.DATA_TYPE) === "INTEGER" ? "INTEGER" : "STRING",
        auditStyle,
        cascadeDelete: splitCodes(d.CASCADE_DELETE),
        insertCascade: splitCodes(d.INSERT_CASCADE),
        updateCascade: splitCodes(d.UPDATE_CASCADE),
        fields: Object.freeze(fields),
        fieldsByCode: new Map(fields.map((f) => [f.code, f])),
        relations: Object.freeze(forward),
        reverseRelations: Object.freeze(reverse),
        relationsByName: relationsByName(forward, reverse),
        sorts,
        compositeIndexes: Object.freeze(compositeIndexes.map((f) => Object.freeze(f))),
        history: d.HISTORY !== false,
        rowScope: Object.freeze(rowScope.map((k) => Object.freeze(k))),
      } satisfies DimensionDef),
    );
  }

  const menu: MenuNode[] = rows.TB_MENU.map((m) =>
    Object.freeze({
      code: m.COD_MENU,
      nleft: m.NLEFT,
      nright: m.NRIGHT,
      description: m.DESC_MENU ?? null,
      dim: m.COD_DIM ?? null,
    }),
  ).sort((a, b) => a.nleft - b.nleft);
  const documents = new Map<string, DocumentDef>(
    rows.TB_DOCUMENT.map((doc) => [
      doc.DOC_NAME,
      Object.freeze({ name: doc.DOC_NAME, rootDim: doc.COD_DIM, definition: doc.DEFINITION }),
    ]),
  );

  return Object.freeze({
    version,
    dimensions,
    menu: Object.freeze(menu),
    menuByCode: new Map(menu.map((m) => [m.code, m])),
    documents,
    accessViews: createViewCache(),
  });
}

/** The configuration of a field in a center_dett context (decisions.md §2, TB_COST.CENTER_DETT). */
export function fieldConfig(field: FieldDef, centerDett: string | null | undefined): FieldConfig {
  if (centerDett) {
    const ctx = field.contextConfigs.get(centerDett);
    if (ctx) return ctx;
  }
  return field.config;
}

/** Nodes covered by a node (itself and its nested-set subtree). */
export function menuSubtree(model: MetadataModel, code: string): MenuNode[] {
  const node = model.menuByCode.get(code);
  if (!node) return [];
  return model.menu.filter((m) => m.nleft >= node.nleft && m.nright <= node.nright);
}

/**
 * Relations: TB_OBJECT rows, plus AC/VARS fields whose TB_OBJECT row is missing (destination key),
 * each with its name (decisions §2: REL_NAME, else the destination's code when only one relation
 * of the dimension leads there, else the field's code). Metadata validation reads the same names.
 */
export function resolveRelations(rows: Pick<MetadataRows, "TB_DIM" | "TB_VAR" | "TB_OBJECT">): Relation[] {
  const dimRows = new Map(rows.TB_DIM.map((d) => [d.COD_DIM, d]));
  type RawRel = Omit<Relation, "name"> & { relName: string | null };
  const rawRelations: RawRel[] = rows.TB_OBJECT.map((o) => ({
    fromDim: o.COD_DIM,
    fromField: o.COD_VAR,
    toDim: o.COD_DIM_OBJ,
    toField: o.COD_VAR_OBJ,
    descField: o.COD_VAR_DESC ?? null,
    relName: o.REL_NAME ?? null,
  }));
  for (const v of rows.TB_VAR) {
    if ((v.TIPO_CAMPO === "AC" || v.TIPO_CAMPO === "VARS") && v.TIPO_VAR) {
      if (rawRelations.some((r) => r.fromDim === v.COD_DIM && r.fromField === v.COD_VAR)) continue;
      const target = dimRows.get(v.TIPO_VAR);
      if (!target) continue;
      rawRelations.push({
        fromDim: v.COD_DIM,
        fromField: v.COD_VAR,
        toDim: v.TIPO_VAR,
        toField: target.ID_FIELD,
        descField: null,
        relName: null,
      });
    }
  }
  return rawRelations.map((r) => {
    const sameTarget = rawRelations.filter((o) => o.fromDim === r.fromDim && o.toDim === r.toDim).length;
    const { relName, ...rest } = r;
    return Object.freeze({ ...rest, name: relName ?? (sameTarget === 1 ? r.toDim : r.fromField) });
  });
}
