// The access profile a GraphQL schema is built for (docs/decisions.md, "A GraphQL schema per access
// profile"): under one metadata version, the dimensions the caller may read through some TB_MENU
// node, the mutations it may use on them, and the fields its peso leaves it. A profile is derived
// from the grant inputs that decide access whatever the request (grants and peso), never from the
// user: every caller whose inputs give the same profile gets the same schema (its key).
//   - Readable: some node through which the access view lets the caller read the dimension (the
//     `source` each field takes), as OpenAPI decides (AccessView.nodeFor).
//   - Mutations: of a readable dimension, those some node lets the caller use: create and
//     batch_create (create), update, patch, command and restore_revision (update), delete (delete).
//     A dimension the caller may write but not read has none: its result type would show it.
//   - Fields: those peso does not hide in every form (TB_COST's default row and its CENTER_DETT
//     rows): the `center_dett` argument is the caller's choice, so a field peso shows in some form
//     is one the caller may ask for. COD_ON_OFF flags and the request's form stay with the resolvers.
//   - Components: the readable dimensions connected by relations between readable dimensions. A
//     dimension's object type refers to its relations' types, so types are shared per component
//     (src/schema/shared-types.ts): the key of one names its members and the fields shown of each.
import { createHash } from "node:crypto";
import { computeAccessView, computeFieldRules, weightAllows } from "../auth/access-view.ts";
import type { Access, DimensionDef, FieldDef, Grant, MetadataModel } from "../types.ts";

/** The fields of a dimension a profile shows. */
export interface ShownFields {
  /** In NUM_VAR order. */
  readonly fields: readonly FieldDef[];
  /** The codes of the fields peso hides, comma-separated ("" for none): part of every type key. */
  readonly hidden: string;
}

export interface DimensionWrites {
  readonly create: boolean;
  readonly update: boolean;
  readonly delete: boolean;
}

/** A dimension the profile reads, with what it shows of it. */
export interface ShownDimension {
  readonly dim: DimensionDef;
  readonly shown: ShownFields;
  readonly writes: DimensionWrites;
}

/** Readable dimensions connected by relations; `key` names the members and their shown fields. */
export interface Component {
  readonly key: string;
  readonly members: readonly ShownDimension[];
}

export interface SchemaProfile {
  /** What the profile shows, hashed: equal keys, equal schemas (under one metadata version). */
  readonly key: string;
  readonly version: number;
  readonly peso: number;
  /** The readable dimensions, by code, in code order. */
  readonly dimensions: ReadonlyMap<string, ShownDimension>;
  readonly components: readonly Component[];
  /** Whether any mutation is shown (then `batch` is too). */
  readonly writes: boolean;
}

const NO_WRITES: DimensionWrites = Object.freeze({ create: false, update: false, delete: false });
const ALL_WRITES: DimensionWrites = Object.freeze({ create: true, update: true, delete: true });

/**
 * Whether peso shows `field` in some form: in the default one exactly when its own weight (the
 * default TB_COST row's) allows it, which every form's row is held to (fieldFlagsFor).
 */
function shownInSomeForm(field: FieldDef, peso: number): boolean {
  return weightAllows(peso, field.config.codUtente);
}

/** The fields of `dim` a caller of `peso` is shown. */
export function shownFields(dim: DimensionDef, peso: number): ShownFields {
  const fields = dim.fields.filter((f) => shownInSomeForm(f, peso));
  if (fields.length === dim.fields.length) return { fields: dim.fields, hidden: "" };
  return {
    fields,
    hidden: dim.fields
      .filter((f) => !fields.includes(f))
      .map((f) => f.code)
      .join(","),
  };
}

/** The dimensions a create of `dim` writes too: its INSERT_CASCADE children and theirs, `dim` first. */
export function insertCascadeOf(model: MetadataModel, dim: DimensionDef): DimensionDef[] {
  const seen = new Map<string, DimensionDef>([[dim.code, dim]]);
  const walk = (d: DimensionDef) => {
    for (const code of d.insertCascade) {
      const child = model.dimensions.get(code);
      if (!child || seen.has(code)) continue;
      seen.set(code, child);
      walk(child);
    }
  };
  walk(dim);
  return [...seen.values()];
}

/** Read and write access per dimension: through some TB_MENU node, as the access view decides it. */
function accessThroughMenu(
  model: MetadataModel,
  grants: readonly Grant[],
  peso: number,
): Map<string, Set<Access>> {
  const found = new Map<string, Set<Access>>();
  // A node with COD_DIM serves that dimension; a grouping node serves those no node serves (and
  // the dimensions of the nodes below it, which a grant covering it covers too: found through them).
  const served = new Set(model.menu.map((n) => n.dim).filter((d) => d !== null));
  const unserved = [...model.dimensions.keys()].filter((code) => !served.has(code));
  const rules = computeFieldRules(peso, null);
  const accesses: Access[] = ["read", "create", "update", "delete"];
  for (const node of model.menu) {
    const dims = node.dim ? (model.dimensions.has(node.dim) ? [node.dim] : []) : unserved;
    if (!dims.length) continue;
    const view = computeAccessView(model, { grants, peso, centerDett: null, source: node.code }, rules);
    for (const access of accesses) {
      // The decision does not depend on which of a grouping node's unserved dimensions is asked.
      if (!view.may(dims[0]!, access)) continue;
      for (const code of dims) {
        const set = found.get(code);
        if (set) set.add(access);
        else found.set(code, new Set([access]));
      }
    }
  }
  return found;
}

/** Groups the readable dimensions into components (relations between readable dimensions). */
function componentsOf(dims: ReadonlyMap<string, ShownDimension>): Component[] {
  const parent = new Map<string, string>([...dims.keys()].map((c) => [c, c]));
  const root = (code: string): string => {
    let r = code;
    while (parent.get(r) !== r) r = parent.get(r)!;
    parent.set(code, r);
    return r;
  };
  for (const { dim } of dims.values()) {
    for (const r of dim.relations) if (dims.has(r.toDim)) parent.set(root(dim.code), root(r.toDim));
  }
  const groups = new Map<string, ShownDimension[]>();
  for (const shown of dims.values()) {
    const r = root(shown.dim.code);
    const group = groups.get(r);
    if (group) group.push(shown);
    else groups.set(r, [shown]);
  }
  return [...groups.values()].map((members) => ({
    key: hash(members.map((m) => `${m.dim.code}:${m.shown.hidden}`).join("\n")),
    members,
  }));
}

function hash(text: string): string {
  return createHash("sha256").update(text).digest("base64url");
}

/** The profile of `dims` (readable dimensions with their writes) for a caller of `peso`. */
function profileFrom(
  model: MetadataModel,
  peso: number,
  access: (dim: DimensionDef) => DimensionWrites | null,
): SchemaProfile {
  const dimensions = new Map<string, ShownDimension>();
  for (const dim of [...model.dimensions.values()].sort((a, b) => a.code.localeCompare(b.code))) {
    const writes = access(dim);
    if (writes) dimensions.set(dim.code, { dim, shown: shownFields(dim, peso), writes });
  }
  // The key: what each readable dimension shows and allows, and the fields shown of the dimensions
  // a create input lists besides (INSERT_CASCADE children the caller may not read).
  const lines: string[] = [];
  const cascaded = new Set<string>();
  for (const { dim, shown, writes } of dimensions.values()) {
    lines.push(
      `${dim.code} ${writes.create ? "c" : ""}${writes.update ? "u" : ""}${writes.delete ? "d" : ""} ${shown.hidden}`,
    );
    if (writes.create) {
      for (const child of insertCascadeOf(model, dim))
        if (!dimensions.has(child.code)) cascaded.add(child.code);
    }
  }
  for (const code of [...cascaded].sort())
    lines.push(`+${code} ${shownFields(model.dimensions.get(code)!, peso).hidden}`);
  return {
    key: hash(lines.join("\n")),
    version: model.version,
    peso,
    dimensions,
    components: componentsOf(dimensions),
    writes: [...dimensions.values()].some((d) => d.writes.create || d.writes.update || d.writes.delete),
  };
}

/** The profile of a caller holding `grants` with `peso`, under `model`. */
export function profileOf(model: MetadataModel, grants: readonly Grant[], peso: number): SchemaProfile {
  const access = accessThroughMenu(model, grants, peso);
  return profileFrom(model, peso, (dim) => {
    const allowed = access.get(dim.code);
    if (!allowed?.has("read")) return null;
    const writes = {
      create: allowed.has("create"),
      update: allowed.has("update"),
      delete: allowed.has("delete"),
    };
    return writes.create || writes.update || writes.delete ? writes : NO_WRITES;
  });
}

/**
 * The full profile: every dimension, field and mutation (an administrator's view; what
 * `npm run schema:print` prints and codegen reads).
 */
export function fullProfile(model: MetadataModel): SchemaProfile {
  return profileFrom(model, Number.NEGATIVE_INFINITY, () => ALL_WRITES);
}
