// The access view: what one set of grant inputs (grants, peso, center_dett, source) may do under one
// metadata version, decided once and then only looked up. Authorization (src/auth/authorize.ts),
// the planner, the write field rules, the presenters, OpenAPI, GraphQL and the event feed all read
// the same view, so "may the caller read dimension X" and "may the caller filter on field F" have
// one answer each. Views are computed lazily per dimension and kept per metadata model
// (src/auth/view-cache.ts): a request whose caller was seen before computes nothing.
import { type ApiError, BadRequestError, PermissionDeniedError } from "../errors.ts";
import { fieldConfig } from "../metadata/build.ts";
import type {
  Access,
  DimensionDef,
  FieldDef,
  Flag,
  Grant,
  MetadataModel,
  Operation,
  RequestContext,
} from "../types.ts";
import { type ParsedFilters, type RowRule, rowRule } from "./row-scope.ts";
import { type GrantInputs, grantCovers, grantInputsOf, grantKey, sourceServes } from "./grants.ts";

interface Requirement {
  /** The operation a covering grant must hold, with at least `level`. */
  operation: Operation;
  level: number;
  /** Force delete: a covering grant must also hold this operation (the separate grant of spec 5.8). */
  extra?: Operation;
}

export const REQUIREMENTS: Record<Access, Requirement> = {
  read: { operation: "read", level: 1 },
  create: { operation: "write", level: 2 },
  update: { operation: "write", level: 2 },
  delete: { operation: "write", level: 3 },
  force_delete: { operation: "write", level: 3, extra: "force_delete" },
  // Metadata is shared by every tenant of a database (decisions §6): changing it is a platform
  // administrator's right, never a tenant admin's.
  metadata: { operation: "metadata", level: 4 },
};

/** The 403 of spec 7.2: `required_grant` is the level (or operation) missing; `user_grants` all grants. */
export function deniedFor(
  grants: readonly Grant[],
  message: string,
  required: number | string,
  details?: Record<string, unknown>,
): PermissionDeniedError {
  return new PermissionDeniedError(message, {
    extra: {
      required_grant: required,
      user_grants: grants.map((g) => ({
        COD_MENU: g.COD_MENU,
        NLEFT: g.NLEFT,
        NRIGHT: g.NRIGHT,
        OPERATIONS: g.OPERATIONS,
        LEVEL: g.LEVEL,
      })),
    },
    ...(details ? { details } : {}),
  });
}

/** peso against COD_UTENTE (spec 5.8.6): visible when the weight is null or >= the user's peso. */
export function weightAllows(peso: number, codUtente: number | null): boolean {
  return codUtente === null || codUtente >= peso;
}

/** The covering grants, or the refusal to throw (made only when thrown: askers pay for no error). */
export type AccessDecision = { readonly grants: readonly Grant[] } | { readonly refusal: () => ApiError };

/**
 * Whether the caller may perform `access` on `dimCode` through `source` (spec 5.8 with
 * decisions.md §6, in order: source given, a grant covering it, the source serving the dimension,
 * operation and level, the force-delete grant): 400 MISSING_PARAMETER without a source, 403
 * INSUFFICIENT_PERMISSIONS otherwise. Tenant isolation is not decided here: every query filters
 * on the caller's tenant.
 */
function decideThrough(
  model: MetadataModel,
  grants: readonly Grant[],
  source: string | null,
  dimCode: string | null,
  access: Access,
): AccessDecision {
  if (!source) {
    return {
      refusal: () =>
        new BadRequestError(
          "MISSING_PARAMETER",
          "The query parameter source is required (in GraphQL, the argument source): give the code of the menu entry (TB_MENU.COD_MENU) the dimension is reached through.",
          {
            field: "source",
          },
        ),
    };
  }
  const req = REQUIREMENTS[access];
  const deny = (message: string, required: number | string, details?: Record<string, unknown>) => ({
    refusal: () => deniedFor(grants, message, required, details),
  });
  // Source-layer refusals name the level the access needs; details say which rule refused it.
  const sourceDetails = (reason: string, extra: Record<string, unknown> = {}) => ({
    reason,
    source,
    ...(dimCode !== null ? { dimension: dimCode } : {}),
    ...extra,
  });
  const node = model.menuByCode.get(source);
  if (!node) {
    return deny(
      `Source ${source} is not a security area (TB_MENU).`,
      req.level,
      sourceDetails("unknown_source"),
    );
  }
  const covering = grants.filter((g) => grantCovers(g, node));
  if (!covering.length) {
    return deny(`No grant covers source ${source}.`, req.level, sourceDetails("no_grant_covers_source"));
  }
  if (dimCode !== null && !sourceServes(model, node, dimCode)) {
    return deny(
      node.dim
        ? `Source ${source} serves dimension ${node.dim}, not ${dimCode}.`
        : `Source ${source} does not serve dimension ${dimCode}.`,
      req.level,
      sourceDetails("source_serves_other_dimension", node.dim ? { served_dimension: node.dim } : {}),
    );
  }
  const withOperation = covering.filter((g) => g.OPERATIONS.includes(req.operation));
  if (!withOperation.length) {
    return deny(`The operation ${req.operation} is not granted on ${source}.`, req.operation);
  }
  const level = Math.max(...withOperation.map((g) => g.LEVEL));
  if (level < req.level) {
    return deny(
      `Level ${req.level} is required for ${access} on ${source}; the grant gives ${level}.`,
      req.level,
    );
  }
  if (req.extra && !covering.some((g) => g.OPERATIONS.includes(req.extra!))) {
    return deny(`A ${req.extra} grant is required on ${source}.`, req.extra);
  }
  return { grants: covering };
}

// ---------------------------------------------------------------- field rules

const FLAGS: readonly Flag[] = ["L", "D", "N", "M", "R"];

/**
 * One dimension's fields as one caller sees them (COD_ON_OFF in the center_dett context, then
 * peso). A field hidden by peso is unknown: it does not exist for this caller.
 */
export interface DimensionFields {
  readonly dim: DimensionDef;
  /** The fields the caller may know exist, in NUM_VAR order. */
  readonly visible: readonly FieldDef[];
  /** The field named `name` if the caller may know it exists (undefined: none, or hidden by peso). */
  visibleField(name: string): FieldDef | undefined;
  isVisible(field: FieldDef): boolean;
  /** Whether `field` carries `flag` for this caller (L list, D detail, N create, M modify, R search). */
  allows(field: FieldDef, flag: Flag): boolean;
  /** The fields that carry `flag` for this caller, in NUM_VAR order. */
  withFlag(flag: Flag): readonly FieldDef[];
}

/** Field rules of every dimension for one (peso, center_dett): computed per dimension on first use. */
export interface FieldRules {
  of(dim: DimensionDef): DimensionFields;
}

/**
 * The flags `field` carries for a caller of `peso` in `centerDett`; null when peso hides it. The
 * field's own weight (its default TB_COST row's COD_UTENTE) holds in every form: a form's row may
 * weigh it further (hide it from more callers there), never lift it, since the form is the caller's
 * choice (`center_dett`), so a form row without COD_UTENTE would otherwise show the field to anyone
 * who names that form.
 */
export function fieldFlagsFor(
  field: FieldDef,
  peso: number,
  centerDett: string | null | undefined,
): ReadonlySet<Flag> | null {
  if (!weightAllows(peso, field.config.codUtente)) return null;
  const cfg = fieldConfig(field, centerDett);
  return weightAllows(peso, cfg.codUtente) ? cfg.flags : null;
}

function dimensionFields(dim: DimensionDef, peso: number, centerDett: string | null): DimensionFields {
  const flagsOf = new Map<FieldDef, ReadonlySet<Flag>>();
  const byFlag = new Map<Flag, FieldDef[]>(FLAGS.map((f) => [f, []]));
  const visible: FieldDef[] = [];
  for (const field of dim.fields) {
    const flags = fieldFlagsFor(field, peso, centerDett);
    if (!flags) continue;
    visible.push(field);
    flagsOf.set(field, flags);
    for (const flag of flags) byFlag.get(flag)?.push(field);
  }
  const none: readonly FieldDef[] = [];
  return {
    dim,
    visible,
    visibleField(name) {
      const field = dim.fieldsByCode.get(name);
      return field && flagsOf.has(field) ? field : undefined;
    },
    isVisible: (field) => flagsOf.has(field),
    allows: (field, flag) => flagsOf.get(field)?.has(flag) === true,
    withFlag: (flag) => byFlag.get(flag) ?? none,
  };
}

export function computeFieldRules(peso: number, centerDett: string | null): FieldRules {
  const byDim = new Map<string, DimensionFields>();
  return {
    of(dim) {
      let found = byDim.get(dim.code);
      if (!found) {
        found = dimensionFields(dim, peso, centerDett);
        byDim.set(dim.code, found);
      }
      return found;
    },
  };
}

// ---------------------------------------------------------------- the view

declare const authorizedFor: unique symbol;

/**
 * A dimension the caller was authorized for, with the access checked and the caller's view: the
 * proof the planner (planList, planRecord, planCount) and the write pipeline (runWrite) require.
 * Only `authorizeRead` and `authorizeWrite` (through AccessView.authorized) make one, so no path
 * reaches SQL without the check, and what comes after reads the view the check was made with.
 */
export type AuthorizedDimension<A extends Access = Access> = DimensionDef & {
  readonly view: AccessView;
  /** The dimension's fields as this caller sees them. */
  readonly rules: DimensionFields;
  readonly [authorizedFor]: A;
};

export interface AccessView {
  /** The cache key (grant inputs); the metadata version is the cache's. */
  readonly key: string;
  readonly version: number;
  readonly inputs: GrantInputs;
  /** The highest level the caller holds on the source (0 when none, or no source). */
  readonly sourceLevel: number;
  /** The decision for `access` on `dimCode` (null: the source alone) through the view's source. */
  decide(dimCode: string | null, access: Access): AccessDecision;
  /** Whether `decide` lets the caller through. */
  may(dimCode: string | null, access: Access): boolean;
  /** Throws the refusal unless `decide` lets the caller through; returns the covering grants. */
  require(dimCode: string | null, access: Access): readonly Grant[];
  /**
   * The first TB_MENU node serving `dimCode` through which the caller may perform `access` on it,
   * whatever the request's source (null: none): where OpenAPI, related reads and cascaded writes
   * look.
   */
  nodeFor(dimCode: string, access: Access): string | null;
  /**
   * The source through which a related dimension is reached ($expand, documents, relation pages,
   * cascades): the view's own source when it lets the caller perform `access` on `dimCode`, else
   * `nodeFor`.
   */
  sourceFor(dimCode: string, access: Access): string | null;
  /** The dimension's fields as the caller sees them. */
  fields(dim: DimensionDef): DimensionFields;
  /** The proof for `access` on `dim` (the same object each time), or the refusal thrown. */
  authorized<A extends Access>(dim: DimensionDef, access: A): AuthorizedDimension<A>;
  /**
   * The rows of `dim` the covering grants let through for `access` (decisions.md §17), to bind to
   * the caller's values (src/auth/row-scope.ts). Worked out once per dimension and access.
   */
  rowRule(dim: DimensionDef, access: Access): RowRule;
  /**
   * The row rule of `dim` for `access` through `source` instead of the view's own (a related read
   * or a cascaded write, through `sourceFor`): the rule of the same grant inputs under that
   * source, kept per dimension, access and source. A null source (no node lets the caller
   * through): a read gets nothing of a scoped or filtered dimension (no grant), a write (a
   * cascade) the dimension's ROW_SCOPE keys alone, no grant lifting them.
   */
  rowRuleThrough(dim: DimensionDef, access: Access, source: string | null): RowRule;
}

/** A grant holding every operation, no `all_rows`, no filter: the scope keys and nothing else. */
const KEYS_ONLY: Grant = {
  COD_MENU: "",
  NLEFT: 0,
  NRIGHT: 0,
  OPERATIONS: ["read", "write", "force_delete", "metadata"],
  LEVEL: 0,
};

export function computeAccessView(model: MetadataModel, inputs: GrantInputs, rules: FieldRules): AccessView {
  const key = grantKey(inputs);
  const decisions = new Map<string, AccessDecision>();
  const nodes = new Map<string, string | null>();
  const rulesThrough = new Map<string, RowRule>();
  const proofs = new Map<string, AuthorizedDimension>();
  const rowRules = new Map<string, RowRule>();
  const parsedFilters: ParsedFilters = new Map();
  const sourceNode = inputs.source ? model.menuByCode.get(inputs.source) : undefined;
  const sourceLevel = sourceNode
    ? Math.max(0, ...inputs.grants.filter((g) => grantCovers(g, sourceNode)).map((g) => g.LEVEL))
    : 0;

  const view: AccessView = {
    key,
    version: model.version,
    inputs,
    sourceLevel,
    decide(dimCode, access) {
      // Kept only for dimensions that exist: a name from the request must not grow the view.
      if (dimCode !== null && !model.dimensions.has(dimCode))
        return decideThrough(model, inputs.grants, inputs.source, dimCode, access);
      const k = `${dimCode === null ? "\u0001" : dimCode}\u0000${access}`;
      let decision = decisions.get(k);
      if (!decision) {
        decision = decideThrough(model, inputs.grants, inputs.source, dimCode, access);
        decisions.set(k, decision);
      }
      return decision;
    },
    may: (dimCode, access) => "grants" in view.decide(dimCode, access),
    require(dimCode, access) {
      const decision = view.decide(dimCode, access);
      if ("refusal" in decision) throw decision.refusal();
      return decision.grants;
    },
    nodeFor(dimCode, access) {
      const k = `${dimCode}\u0000${access}`;
      let found = nodes.get(k);
      if (found === undefined) {
        const node = model.menu.find(
          (n) =>
            n.dim === dimCode && "grants" in decideThrough(model, inputs.grants, n.code, dimCode, access),
        );
        found = node?.code ?? null;
        if (model.dimensions.has(dimCode)) nodes.set(k, found);
      }
      return found;
    },
    sourceFor(dimCode, access) {
      return view.may(dimCode, access) ? inputs.source : view.nodeFor(dimCode, access);
    },
    fields: (dim) => rules.of(dim),
    authorized<A extends Access>(dim: DimensionDef, access: A): AuthorizedDimension<A> {
      view.require(dim.code, access);
      const k = `${dim.code}\u0000${access}`;
      let proof = proofs.get(k);
      if (!proof) {
        proof = Object.freeze({ ...dim, view, rules: rules.of(dim) }) as AuthorizedDimension;
        proofs.set(k, proof);
      }
      return proof as AuthorizedDimension<A>;
    },
    rowRule(dim, access) {
      const k = `${dim.code}\u0000${access}`;
      let rule = rowRules.get(k);
      if (!rule) {
        const decision = view.decide(dim.code, access);
        const grants = "grants" in decision ? decision.grants : [];
        rule = rowRule(dim, grants, REQUIREMENTS[access].operation, parsedFilters);
        if (model.dimensions.has(dim.code)) rowRules.set(k, rule);
      }
      return rule;
    },
    rowRuleThrough(dim, access, source) {
      if (source === inputs.source && source !== null) return view.rowRule(dim, access);
      const k = `${dim.code}\u0000${access}\u0000${source ?? "\u0001"}`;
      let rule = rulesThrough.get(k);
      if (!rule) {
        rule =
          source === null
            ? rowRule(
                dim,
                access === "read" ? [] : [KEYS_ONLY],
                REQUIREMENTS[access].operation,
                parsedFilters,
              )
            : viewFor(model, { ...inputs, source }).rowRule(dim, access);
        // Kept only for what the metadata names: a source from the request must not grow the view.
        if (model.dimensions.has(dim.code) && (source === null || model.menuByCode.has(source)))
          rulesThrough.set(k, rule);
      }
      return rule;
    },
  };
  return view;
}

/**
 * The caller's access view under `model`: from the model's cache when the same grant inputs were
 * seen under this metadata version, else computed (lazily, per dimension) and kept there.
 */
export function accessView(ctx: RequestContext, model: MetadataModel): AccessView {
  const inputs = grantInputsOf(ctx);
  return viewFor(model, inputs);
}

export function viewFor(model: MetadataModel, inputs: GrantInputs): AccessView {
  return model.accessViews.view(grantKey(inputs), () =>
    computeAccessView(
      model,
      inputs,
      model.accessViews.fieldRules(`${inputs.peso}\u0000${inputs.centerDett ?? ""}`, () =>
        computeFieldRules(inputs.peso, inputs.centerDett),
      ),
    ),
  );
}
