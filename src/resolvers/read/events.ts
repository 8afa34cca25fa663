// Live events of one dimension for one caller (graphql.md: D_events): only the caller's tenant,
// only the dimension asked for, authorized like a read on the source, and `data` limited to the
// fields the caller may read in detail (D flag and peso). The stream is bounded: a consumer that
// falls more than MAX_PENDING events behind is ended with an error instead of buffering forever.
import { authorizeRead } from "../../auth/authorize.ts";
import { detailData, detailFieldsOf } from "../../auth/detail-fields.ts";
import { eventScope } from "../../auth/row-match.ts";
import { rowScopeOf } from "../../query/plan.ts";
import { ApiError, BadRequestError } from "../../errors.ts";
import type { OutboxMessage } from "../../events/bus.ts";
import type { EventFeed } from "../../events/feed.ts";
import type { MetadataModel, RequestContext } from "../../types.ts";

export interface DimensionEvent {
  event_id: string;
  event_type: string;
  dimension: string;
  record_id: string;
  timestamp: string;
  data: Record<string, unknown> | null;
}

export const MAX_PENDING_EVENTS = 1000;

export class SubscriptionOverflowError extends ApiError {
  constructor() {
    super(
      503,
      "SUBSCRIPTION_OVERFLOW",
      "ServiceUnavailable",
      `The subscriber fell more than ${MAX_PENDING_EVENTS} events behind; subscribe again.`,
    );
  }
}

export async function subscribeToEvents(
  deps: { feed: EventFeed; metadata: { current(): MetadataModel } },
  request: RequestContext,
  dimCode: string,
  eventTypes: readonly string[] | null,
): Promise<AsyncIterableIterator<DimensionEvent>> {
  // What the caller may see of the dimension under one metadata version: its authorization on the
  // source, its row scope and the fields it reads in detail. Made again, at the next event, once the
  // metadata has moved (a field hidden by a weight, a scope added, a menu node moved out of the
  // grant), so that a live subscription never delivers what a read made now would not; when the
  // caller may no longer read the dimension at all, the stream ends with that refusal.
  // Only events of rows the caller's scope lets it see (decisions.md §17), judged on the record the
  // event carries and, for an update, on the record before it: a row that left the scope is told
  // with no data (the caller no longer sees it); a scope that cannot be judged in memory withholds
  // the event (src/auth/row-match.ts).
  const viewOf = (model: MetadataModel) => {
    const dim = authorizeRead(request, model, dimCode);
    const { codes, key } = detailFieldsOf(dim, dim.rules.withFlag("D"));
    return {
      version: model.version,
      dim,
      scope: rowScopeOf(request, dim),
      readable: codes,
      readableKey: key,
    };
  };
  let view = viewOf(deps.metadata.current());
  const dim = view.dim;
  // Only the dimension's own types: another name would never match, and the stream would stay
  // silent as if nothing happened (a webhook registration refuses it the same way).
  const known = ["Created", "Updated", "Deleted"].map((kind) => `${dim.code}${kind}`);
  for (const type of eventTypes ?? [])
    if (!known.includes(type))
      throw new BadRequestError(
        "INVALID_PARAMETER",
        `event_types: ${JSON.stringify(type.slice(0, 60))} is not an event of ${dim.code}; its events are ${known.join(", ")}.`,
        { field: "event_types" },
      );
  const wanted = eventTypes?.length ? new Set(eventTypes) : null;
  const tenant = request.principal.tenantId;

  const pending: DimensionEvent[] = [];
  let waiting: ((r: IteratorResult<DimensionEvent>) => void) | null = null;
  let failed: ((err: unknown) => void) | null = null;
  let finished = false;
  let overflow = false;
  /** Why the stream ended, to answer the consumer with: access lost with the metadata's change. */
  let refused: unknown = null;

  // Subscribers who see the same fields share one view of an event (the feed's memo per event):
  // what the WebSocket transport serialises once per field set (src/graphql/websocket.ts).
  const toEvent = (m: OutboxMessage, left: boolean, shared: Map<string, unknown>): DimensionEvent => {
    const key = left ? `${dim.code}:left` : view.readableKey;
    const known = shared.get(key) as DimensionEvent | undefined;
    if (known) return known;
    const event = eventView(m, left);
    shared.set(key, event);
    return event;
  };
  const eventView = (m: OutboxMessage, left: boolean): DimensionEvent => {
    const data = left ? null : detailData(m.PAYLOAD ?? {}, view.readable);
    return {
      event_id: m.OUTBOX_ID,
      event_type: m.EVENT_TYPE,
      dimension: m.AGGREGATE_TYPE,
      record_id: m.AGGREGATE_ID,
      timestamp: m.CREATED_AT,
      data,
    };
  };

  const stopListening = await deps.feed.listen((m, shared) => {
    if (finished || m.TENANT_ID !== tenant || m.AGGREGATE_TYPE !== dim.code) return;
    if (wanted && !wanted.has(m.EVENT_TYPE)) return;
    const model = deps.metadata.current();
    if (model.version !== view.version) {
      try {
        view = viewOf(model);
      } catch (err) {
        refused = err;
        pending.length = 0;
        void finish();
        return;
      }
    }
    const { scope } = view;
    const standing = scope ? eventScope(scope, m.PAYLOAD ?? {}, m.PREVIOUS) : "in";
    if (standing === "out") return;
    const event = toEvent(m, standing === "left", shared);
    if (waiting) {
      const w = waiting;
      waiting = null;
      failed = null;
      w({ value: event, done: false });
      return;
    }
    if (pending.length >= MAX_PENDING_EVENTS) {
      overflow = true;
      void finish();
      return;
    }
    pending.push(event);
  });

  async function finish(): Promise<IteratorResult<DimensionEvent>> {
    if (!finished) {
      finished = true;
      pending.length = overflow ? 0 : pending.length;
      await stopListening();
    }
    if (waiting) {
      const w = waiting;
      const f = failed;
      waiting = null;
      failed = null;
      if (overflow && f) f(new SubscriptionOverflowError());
      else if (refused && f) {
        // Told once; the stream is then done.
        f(refused);
        refused = null;
      } else w({ value: undefined, done: true });
    }
    return { value: undefined, done: true };
  }

  const iterator: AsyncIterableIterator<DimensionEvent> = {
    next() {
      if (overflow) return Promise.reject(new SubscriptionOverflowError());
      if (refused) {
        const err = refused;
        refused = null;
        return Promise.reject(err);
      }
      const event = pending.shift();
      if (event) return Promise.resolve({ value: event, done: false });
      if (finished) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve, reject) => {
        waiting = resolve;
        failed = reject;
      });
    },
    return: finish,
    throw: async (err) => {
      await finish();
      throw err;
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}
