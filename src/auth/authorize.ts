// Authorization, one module for every route (REST and GraphQL): the layers of spec 5.8 with
// decisions.md §6, as the caller's access view decides them (src/auth/access-view.ts). Resolvers
// call these; no adapter decides access on its own.
import { NotFoundError, type PermissionDeniedError } from "../errors.ts";
import type {
  Access,
  DimensionDef,
  FieldDef,
  Flag,
  Grant,
  MetadataModel,
  Principal,
  RequestContext,
} from "../types.ts";
import {
  type AccessView,
  type AuthorizedDimension,
  accessView,
  deniedFor,
  fieldFlagsFor,
  weightAllows,
} from "./access-view.ts";

export type { AuthorizedDimension } from "./access-view.ts";
export { grantCovers, sourceServes } from "./grants.ts";

/** The 403 of spec 7.2: `required_grant` is the level (or operation) missing; `user_grants` all grants. */
export function permissionDenied(
  principal: Principal,
  message: string,
  required: number | string,
  details?: Record<string, unknown>,
): PermissionDeniedError {
  return deniedFor(principal.grants, message, required, details);
}

/**
 * Checks that the caller may perform `access` on dimension `dimCode` through the request's source
 * (the caller's access view decides: src/auth/access-view.ts). Throws 400 MISSING_PARAMETER
 * without a source, 403 INSUFFICIENT_PERMISSIONS otherwise. Returns the grants that cover the
 * source. Tenant isolation is not decided here: every query filters on ctx.principal.tenantId.
 */
export function authorize(
  ctx: RequestContext,
  model: MetadataModel,
  dimCode: string | null,
  access: Access,
): readonly Grant[] {
  return accessView(ctx, model).require(dimCode, access);
}

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
  view: AccessView = accessView(ctx, model),
): AuthorizedDimension<"read"> {
  return view.authorized(lookup(model, dimCode), "read");
}

/**
 * Writes, as reads: an unknown dimension is 404 first, then the grant for `access` on the source
 * (400/403); a mistyped dimension gets one answer whatever the method.
 */
export function authorizeWrite<A extends Exclude<Access, "read" | "metadata">>(
  ctx: RequestContext,
  model: MetadataModel,
  dimCode: string,
  access: A,
): AuthorizedDimension<A> {
  const dim = lookup(model, dimCode);
  const view = accessView(ctx, model);
  view.require(dimCode, access);
  return view.authorized(dim, access);
}

/** The highest level the caller holds on the request's source (0 when none). */
export function sourceLevel(ctx: RequestContext, model: MetadataModel): number {
  return accessView(ctx, model).sourceLevel;
}

// The rules of one field, for one caller. Resolvers, the planner and the adapters read them from
// the caller's access view (AccessView.fields), which is computed with these same rules.

/** peso against COD_UTENTE (spec 5.8.6): visible when the weight is null or >= the user's peso. */
export function pesoAllows(principal: Principal, codUtente: number | null): boolean {
  return weightAllows(principal.peso, codUtente);
}

/** Whether `field` carries `flag` for this caller (COD_ON_OFF in the center_dett context, then peso). */
export function fieldAllows(ctx: RequestContext, field: FieldDef, flag: Flag): boolean {
  return fieldFlagsFor(field, ctx.principal.peso, ctx.centerDett)?.has(flag) === true;
}

/** Whether the caller may know the field exists at all (a field hidden by peso is unknown). */
export function fieldKnown(ctx: RequestContext, field: FieldDef): boolean {
  return fieldFlagsFor(field, ctx.principal.peso, ctx.centerDett) !== null;
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
