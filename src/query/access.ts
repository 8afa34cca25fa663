// Access to a dimension reached through a relation ($expand, document parts, relation pages)
// rather than through the request's source: allowed when the request's source covers it, or when
// some TB_MENU node serving that dimension is covered by a read grant of the caller. The caller's
// access view answers (AccessView.sourceFor); the rules themselves stay in src/auth.
import { accessView } from "../auth/access-view.ts";
import { permissionDenied } from "../auth/authorize.ts";
import type { MetadataModel, RequestContext } from "../types.ts";

/** The 403 of a relation whose dimension the caller may not read (through `via`). */
export function relatedNotReadable(ctx: RequestContext, dim: string, via: string) {
  return permissionDenied(ctx.principal, `Expanding ${via} needs read access to dimension ${dim}.`, 1, {
    reason: "expand_target_not_readable",
    dimension: dim,
  });
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
  const source = accessView(ctx, model).sourceFor(dim, "read");
  if (source === null) throw relatedNotReadable(ctx, dim, via);
  return source === ctx.source ? ctx : { ...ctx, source };
}
