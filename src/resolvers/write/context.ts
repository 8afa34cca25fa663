import type { MetadataModel, Queryable, RequestContext } from "../../types.ts";

/** What one write needs: the open transaction, the caller, the metadata and the moment. */
export interface WriteContext {
  tx: Queryable;
  ctx: RequestContext;
  model: MetadataModel;
  now: Date;
  /**
   * The system itself writing (fixture import): no grant check and no COD_ON_OFF rules on the
   * body; types, lengths, templates, required fields and foreign keys still apply.
   */
  trusted: boolean;
}
