// Authorization, one module for every route (REST and GraphQL): the layers of spec 5.8 with
// decisions.md §6. Resolvers call these; no adapter decides access on its own.
import { type ApiError, BadRequestError, NotFoundError, PermissionDeniedError } from "../errors.ts";
import { fieldConfig } from "../metadata/build.ts";
import type {
  Access,
  DimensionDef,
  FieldDef,
  Flag,
  Grant,
  MenuNode,
  MetadataModel,
  Operation,
  Principal,
  RequestContext,
} from "../types.ts";

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
export function permissionDenied(
  principal: Principal,
  message: string,
  required: number | string,
  details?: Record<string, unknown>,
): PermissionDeniedError {
  return new PermissionDeniedError(message, {
    extra: { required_grant: required, user_grants: describeGrants(principal.grants) },
    ...(details ? { details } : {}),
  });
}

function describeGrants(grants: Grant[]) {
  return grants.map((g) => ({
    COD_MENU: g.COD_MENU,
    NLEFT: g.NLEFT,
    NRIGHT: g.NRIGHT,
    OPERATIONS: g.OPERATIONS,
    LEVEL: g.LEVEL,
  }));
}

export function grantCovers(grant: Grant, node: MenuNode): boolean {
  return grant.NLEFT <= node.nleft && node.nright <= grant.NRIGHT;
}

/**
 * Whether the source node serves the dimension: a node with COD_DIM serves that one; a grouping
 * node serves the dimensions of the nodes below it, and dimensions no node serves at all.
 */
export function sourceServes(model: MetadataModel, node: MenuNode, dimCode: string): boolean {
  if (node.dim) return node.dim === dimCode;
  const servers = model.menu.filter((m) => m.dim === dimCode);
  return servers.length === 0 || servers.some((m) => node.nleft <= m.nleft && m.nright <= node.nright);
}

/**
 * Checks that the caller may perform `access` on dimension `dimCode` through the request's source
 * (spec 5.8 with decisions.md §6, in order: source given, a grant covering it, the source serving
 * the dimension, operation and level, the force-delete grant). Throws 400 MISSING_PARAMETER without
 * a source, 403 INSUFFICIENT_PERMISSIONS otherwise. Returns the grants that cover the source.
 * Tenant isolation is not decided here: every query filters on ctx.principal.tenantId.
 */
export function authorize(
  ctx: RequestContext,
  model: MetadataModel,
  dimCode: string | null,
  access: Access,
): Grant[] {
  const decision = accessDecision(ctx, model, dimCode, access);
  if ("refusal" in decision) throw decision.refusal();
  return decision.grants;
}

/** Whether `authorize` would let the caller through (no error is made when it would not). */
export function mayAccess(ctx: RequestContext, model: MetadataModel, dimCode: string | null, access: Access) {
  return "grants" in accessDecision(ctx, model, dimCode, access);
}

/**
 * The decision behind `authorize`: the covering grants, or the refusal to throw. The refusal is
 * made only when thrown: callers that only ask (relations, GraphQL) pay for no error object.
 */
function accessDecision(
  ctx: RequestContext,
  model: MetadataModel,
  dimCode: string | null,
  access: Access,
): { grants: Grant[] } | { refusal: () => ApiError } {
  const { principal } = ctx;
  if (!ctx.source) {
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
    refusal: () => permissionDenied(principal, message, required, details),
  });
  // Source-layer refusals name the level the access needs; details say which rule refused it.
  const sourceDetails = (reason: string, extra: Record<string, unknown> = {}) => ({
    reason,
    source: ctx.source,
    ...(dimCode !== null ? { dimension: dimCode } : {}),
    ...extra,
  });
  const node = model.menuByCode.get(ctx.source);
  if (!node) {
    return deny(
      `Source ${ctx.source} is not a security area (TB_MENU).`,
      req.level,
      sourceDetails("unknown_source"),
    );
  }
  const covering = principal.grants.filter((g) => grantCovers(g, node));
  if (!covering.length) {
    return deny(`No grant covers source ${ctx.source}.`, req.level, sourceDetails("no_grant_covers_source"));
  }
  if (dimCode !== null && !sourceServes(model, node, dimCode)) {
    return deny(
      node.dim
        ? `Source ${ctx.source} serves dimension ${node.dim}, not ${dimCode}.`
        : `Source ${ctx.source} does not serve dimension ${dimCode}.`,
      req.level,
      sourceDetails("source_serves_other_dimension", node.dim ? { served_dimension: node.dim } : {}),
    );
  }
  const withOperation = covering.filter((g) => g.OPERATIONS.includes(req.operation));
  if (!withOperation.length) {
    return deny(`The operation ${req.operation} is not granted on ${ctx.source}.`, req.operation);
  }
  const level = Math.max(...withOperation.map((g) => g.LEVEL));
  if (level < req.level) {
    return deny(
      `Level ${req.level} is required for ${access} on ${ctx.source}; the grant gives ${level}.`,
      req.level,
    );
  }
  if (req.extra && !covering.some((g) => g.OPERATIONS.includes(req.extra!))) {
    return deny(`A ${req.extra} grant is required on ${ctx.source}.`, req.extra);
  }
  return { grants: covering };
}

declare const authorizedFor: unique symbol;

/**
 * A dimension the caller was authorized for, with the access checked: the proof the planner
 * (planList, planRecord, planCount) and the write pipeline (runWrite) require. Only
 * `authorizeRead` and `authorizeWrite` make one, so no path reaches SQL without the check.
 */
export type AuthorizedDimension<A extends Access = Access> = DimensionDef & { readonly [authorizedFor]: A };

function lookup(model: MetadataModel, dimCode: string): DimensionDef {
  const dim = model.dimensions.get(dimCode);
  if (!dim)
    throw new NotFoundError("DIMENSION_NOT_FOUND", `Dimension ${dimCode.slice(0, 60)} does not exist.`);
  return dim;
}

/** Reads: an unknown dimension is 404 first, then the grant on the source (400/403). */
export function authorizeRead(
  ctx: RequestContext,
  model: MetadataModel,
  dimCode: string,
): AuthorizedDimension<"read"> {
  const dim = lookup(model, dimCode);
  authorize(ctx, model, dim.code, "read");
  return dim as AuthorizedDimension<"read">;
}

/** Writes: the grant for `access` on the source first (400/403), then the dimension (404). */
export function authorizeWrite<A extends Exclude<Access, "read" | "metadata">>(
  ctx: RequestContext,
  model: MetadataModel,
  dimCode: string,
  access: A,
): AuthorizedDimension<A> {
  authorize(ctx, model, dimCode, access);
  return lookup(model, dimCode) as AuthorizedDimension<A>;
}

/** The highest level the caller holds on the request's source (0 when none). */
export function sourceLevel(ctx: RequestContext, model: MetadataModel): number {
  const node = ctx.source ? model.menuByCode.get(ctx.source) : undefined;
  if (!node) return 0;
  return Math.max(0, ...ctx.principal.grants.filter((g) => grantCovers(g, node)).map((g) => g.LEVEL));
}

/** peso against COD_UTENTE (spec 5.8.6): visible when the weight is null or >= the user's peso. */
export function pesoAllows(principal: Principal, codUtente: number | null): boolean {
  return codUtente === null || codUtente >= principal.peso;
}

/** Whether `field` carries `flag` for this caller (COD_ON_OFF in the center_dett context, then peso). */
export function fieldAllows(ctx: RequestContext, field: FieldDef, flag: Flag): boolean {
  const cfg = fieldConfig(field, ctx.centerDett);
  return cfg.flags.has(flag) && pesoAllows(ctx.principal, cfg.codUtente);
}

/** Whether the caller may know the field exists at all (a field hidden by peso is unknown). */
export function fieldKnown(ctx: RequestContext, field: FieldDef): boolean {
  return pesoAllows(ctx.principal, fieldConfig(field, ctx.centerDett).codUtente);
}

/** The fields of `dim` that carry `flag` for this caller, in NUM_VAR order. */
export function visibleFields(ctx: RequestContext, dim: DimensionDef, flag: Flag): FieldDef[] {
  return dim.fields.filter((f) => fieldAllows(ctx, f, flag));
}

declare const tenantAdmin: unique symbol;

/** A caller who holds a level-4 grant on their tenant's data: the proof the webhook API requires. */
export type TenantAdmin = Principal & { readonly [tenantAdmin]: true };

/**
 * Tenant-wide settings (webhook registrations, the delivery log, event analytics) need a level-4
 * grant on the tenant's data (decisions.md §8); the request's source is not required.
 */
export function authorizeTenantAdmin(principal: Principal): TenantAdmin {
  const ok = principal.grants.some(
    (g) => g.LEVEL >= 4 && (g.OPERATIONS.includes("read") || g.OPERATIONS.includes("write")),
  );
  if (!ok) throw permissionDenied(principal, "This needs a level-4 grant on the tenant's data.", 4);
  return principal as TenantAdmin;
}
