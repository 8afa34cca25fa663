import type { MetadataModel, Queryable, RequestContext, WriteStep } from "../../types.ts";
import type { CreateGroups } from "./create-groups.ts";
import type { RevisionOperation } from "../../history/revisions.ts";

/** Called at each named step of the pipeline; throwing aborts the write (tests inject failures). */
export type StepHook = (step: WriteStep) => void | Promise<void>;

/**
 * The bounds of one request's writes (issue 8): the largest TEXT/JSON value, and the bytes of event
 * payloads the request may still write to the outbox. `events` is shared by every record the
 * request writes (batch items, cascades), so a spread copy of the context spends the same budget.
 */
export interface WriteLimits {
  fieldMaxBytes: number;
  events: { maxBytes: number; usedBytes: number };
}

export function writeLimits(
  config: { fieldMaxBytes: number; requestEventsMaxBytes: number },
  budget?: RequestBudget,
): WriteLimits {
  return {
    fieldMaxBytes: config.fieldMaxBytes,
    events: budget?.events ?? { maxBytes: config.requestEventsMaxBytes, usedBytes: 0 },
  };
}

/**
 * The write bounds of one request made of several writes (a GraphQL operation's mutation fields,
 * issue 18): the records (MAX_BATCH_SIZE) and event bytes (REQUEST_EVENTS_MAX_BYTES) every write
 * of the request spends together, so that aliases cannot multiply them.
 */
export interface RequestBudget {
  records: { max: number; used: number };
  events: { maxBytes: number; usedBytes: number };
}

export function requestBudget(config: {
  maxBatchSize: number;
  requestEventsMaxBytes: number;
}): RequestBudget {
  return {
    records: { max: config.maxBatchSize, used: 0 },
    events: { maxBytes: config.requestEventsMaxBytes, usedBytes: 0 },
  };
}

/** What one write needs: the open transaction, the caller, the metadata and the moment. */
export interface WriteContext {
  limits: WriteLimits;
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
  /**
   * The transaction writes one record and nothing else (createOne): its create may then send the
   * record and its event as the transaction's last statement (create.ts, createAlone).
   */
  soleRecord?: boolean;
  /** The "commit" step was passed already: the write's last statement was sent after it. */
  committed?: boolean;
  /**
   * The group commit of creates (PostgreSQL): a sole create may be written in one statement with
   * creates of its shape that wait meanwhile (create-groups.ts). Without it, each alone.
   */
  creates?: CreateGroups;
  /**
   * What the revision of the record this write is about says happened, when not what the write
   * itself is (a command's update, a revision's restore); cascaded changes keep their own.
   */
  operation?: Extract<RevisionOperation, "command" | "restore">;
}

/** Tells the hook (tests) of a step; without one nothing (no promise made per step). */
export function step(w: Pick<WriteContext, "onStep">, name: WriteStep): void | Promise<void> {
  return w.onStep?.(name);
}
