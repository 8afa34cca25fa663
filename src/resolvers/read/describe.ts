// Metadata reads: describeFields (GET /{dim}/fields, spec 2.4), describeDimension (GET /DIM/{dim}),
// listFieldDefinitions (GET /VAR), listFieldConfigurations (GET /COST). A field hidden by peso is
// left out everywhere, as if it did not exist.
import { fieldConfig } from "../../metadata/build.ts";
import type { DimensionDef, FieldConfig, FieldDef } from "../../types.ts";
import { readableDimension } from "./common.ts";
import type { ReadContext } from "./context.ts";
import type {
  DimensionDescription,
  FieldConfigurationRow,
  FieldDefinitionRow,
  FieldDescription,
} from "./types.ts";

/** Fields usable in the caller's context: COD_ON_OFF (center_dett applied) not empty, peso allowing. */
export async function describeFields(rc: ReadContext, dimCode: string): Promise<FieldDescription[]> {
  const dim = readableDimension(rc, dimCode);
  const out: FieldDescription[] = [];
  for (const f of dim.rules.visible) {
    const cfg = fieldConfig(f, rc.request.centerDett);
    if (cfg.flags.size === 0) continue;
    out.push({
      cod_var: f.code,
      desc_var: f.description,
      data_type: f.dataType,
      length: f.length,
      cod_on_off: cfg.codOnOff,
      required: cfg.required,
      render_hint: cfg.renderHint,
      group_name: cfg.groupName,
      nullable: f.nullable,
      tipo_campo: f.kind,
      tipo_var: f.targetDim,
    });
  }
  return out;
}

export async function describeDimension(rc: ReadContext, dimCode: string): Promise<DimensionDescription> {
  return dimensionDescription(readableDimension(rc, dimCode));
}

/**
 * GET /DIM?source=…: the dimensions the caller may read through the source (a grouping node
 * serves those of its subtree), in code order. A source that grants nothing is a 403 as for any read.
 */
export async function listDimensions(rc: ReadContext): Promise<DimensionDescription[]> {
  rc.view.require(null, "read");
  return [...rc.model.dimensions.values()]
    .sort((a, b) => a.code.localeCompare(b.code))
    .filter((dim) => rc.view.may(dim.code, "read"))
    .map(dimensionDescription);
}

function dimensionDescription(dim: DimensionDef): DimensionDescription {
  return {
    COD_DIM: dim.code,
    DESC_DIM: dim.description,
    TABLE_NAME: dim.tableName,
    ID_FIELD: dim.idField,
    CASCADE_DELETE: dim.cascadeDelete.length ? dim.cascadeDelete.join(",") : null,
  };
}

function definedFields(rc: ReadContext, dimCode: string): FieldDef[] {
  const dim = readableDimension(rc, dimCode);
  return dim.rules.visible.filter((f) => !f.system);
}

export async function listFieldDefinitions(rc: ReadContext, dimCode: string): Promise<FieldDefinitionRow[]> {
  return definedFields(rc, dimCode).map((f) => ({
    COD_DIM: f.dim,
    NUM_VAR: f.numVar,
    COD_VAR: f.code,
    DESC_VAR: f.description,
    DATA_TYPE: f.declaredType,
    LENGTH: f.length,
    DECIMALS: f.decimals,
    NULLABLE: f.nullable,
    TIPO_CAMPO: f.kind,
    TIPO_VAR: f.targetDim,
  }));
}

function costRow(f: FieldDef, cfg: FieldConfig, centerDett: string | null): FieldConfigurationRow[] {
  if (cfg.numCost === null) return [];
  return [
    {
      COD_DIM: f.dim,
      NUM_COST: cfg.numCost,
      COD_VAR: f.code,
      COD_ON_OFF: cfg.codOnOff,
      REQUIRED: cfg.required,
      RENDER_HINT: cfg.renderHint,
      GROUP_NAME: cfg.groupName,
      VALUE_TEMP: cfg.valueTemp,
      COD_UTENTE: cfg.codUtente,
      VALIDATION: cfg.validationSource,
      CENTER_DETT: centerDett,
    },
  ];
}

/** TB_COST rows (those of every center_dett), ordered by NUM_COST. */
export async function listFieldConfigurations(
  rc: ReadContext,
  dimCode: string,
): Promise<FieldConfigurationRow[]> {
  const rows = definedFields(rc, dimCode).flatMap((f) => [
    ...costRow(f, f.config, null),
    ...[...f.contextConfigs].flatMap(([centerDett, cfg]) => costRow(f, cfg, centerDett)),
  ]);
  return rows.sort((a, b) => a.NUM_COST - b.NUM_COST);
}
