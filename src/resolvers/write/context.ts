import type { MetadataModel, Queryable, RequestContext, WriteStep } from "../../types.ts";

/** Called at each named step of the pipeline; throwing aborts the write (tests inject failures). */
export type StepHook = (step: WriteStep) => void | Promise<void>;

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
  /** Test seam: told each step; production passes none. */
  onStep?: StepHook;
}

export async function step(w: Pick<WriteContext, "onStep">, name: WriteStep): Promise<void> {
  if (w.onStep) await w.onStep(name);
}
