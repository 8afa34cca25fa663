// Access to a dimension reached through a relation ($expand) rather than through the request's
// source: allowed when the request's source covers it, or when some TB_MENU node serving that
// dimension is covered by a read grant of the caller. The rules themselves stay in src/auth.
import { mayAccess, permissionDenied } from "../auth/authorize.ts";
import type { MetadataModel, RequestContext } from "../types.ts";

function allowedThrough(
  ctx: RequestContext,
  model: MetadataModel,
  source: string | null,
  dim: string,
): boolean {
  return mayAccess({ ...ctx, source }, model, dim, "read");
}

export function canReadRelated(ctx: RequestContext, model: MetadataModel, dim: string): boolean {
  if (allowedThrough(ctx, model, ctx.source, dim)) return true;
  return model.menu.some((node) => node.dim === dim && allowedThrough(ctx, model, node.code, dim));
}

/** The 403 of a relation whose dimension the caller may not read (through `via`). */
function relatedNotReadable(ctx: RequestContext, dim: string, via: string) {
  return permissionDenied(ctx.principal, `Expanding ${via} needs read access to dimension ${dim}.`, 1, {
    reason: "expand_target_not_readable",
    dimension: dim,
  });
}

export function assertCanReadRelated(
  ctx: RequestContext,
  model: MetadataModel,
  dim: string,
  via: string,
): void {
  if (!canReadRelated(ctx, model, dim)) throw relatedNotReadable(ctx, dim, via);
}

/**
 * The request through which a related dimension is read: the request itself when its source
 * serves the dimension, else the same request through a TB_MENU node serving it that the caller's
 * read grants cover. 403 (naming `via`) when there is none.
 */
export function relatedRequest(
  ctx: RequestContext,
  model: MetadataModel,
  dim: string,
  via: string,
): RequestContext {
  if (allowedThrough(ctx, model, ctx.source, dim)) return ctx;
  const node = model.menu.find((n) => n.dim === dim && allowedThrough(ctx, model, n.code, dim));
  if (node) return { ...ctx, source: node.code };
  throw relatedNotReadable(ctx, dim, via);
}
