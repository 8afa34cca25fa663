// The event bus seam (decisions.md §8): the relay publishes outbox rows to it; subscribers read
// from it, each through its own queue. Two implementations with one interface: RabbitMQ
// (amqp-bus.ts, when AMQP_URL is set) and an in-process bus (here, the embedded default).
import type { DependencyState } from "../types.ts";

/** One outbox row as a message: the body bytes are the JSON of decisions.md §8. */
export interface BusEvent {
  /** OUTBOX_ID as a string: the message id subscribers deduplicate on. */
  id: string;
  /** EVENT_TYPE, e.g. ITEMCreated. */
  type: string;
  tenantId: string;
  /** AGGREGATE_TYPE: the dimension (or metadata table) code. */
  dimension: string;
  /** CREATED_AT of the outbox row. */
  timestamp: Date;
  /** `{OUTBOX_ID, EVENT_TYPE, AGGREGATE_TYPE, AGGREGATE_ID, PAYLOAD, CREATED_AT, TENANT_ID}`. */
  body: Buffer;
  /**
   * The database profile whose outbox the event came from (decisions.md §18); absent for the
   * main database. OUTBOX_IDs are per database: a subscriber deduplicates in the event's database.
   */
  database?: string;
}

/** An event's identity across databases: its database and OUTBOX_ID. */
export function eventKey(event: Pick<BusEvent, "id" | "database">): string {
  return event.database ? `${event.database}:${event.id}` : event.id;
}

/** The parsed message body. */
export interface OutboxMessage {
  OUTBOX_ID: string;
  EVENT_TYPE: string;
  AGGREGATE_TYPE: string;
  AGGREGATE_ID: string;
  PAYLOAD: Record<string, unknown>;
  CREATED_AT: string;
  TENANT_ID: string;
  /**
   * An update's values before the change, of the fields that changed (decisions.md §17): what row
   * scopes judge a row that left them by. Absent for creates and deletes; not in webhook bodies
   * nor subscription data.
   */
  PREVIOUS?: Record<string, unknown>;
}

export interface ReceivedEvent extends BusEvent {
  /** 1 on the first delivery to this subscriber, 2 after one failure, … */
  attempt: number;
}

export type EventHandler = (event: ReceivedEvent) => Promise<void>;
/** A subscriber that processes the events handed out at once together (src/events/batching.ts). */
export type BatchHandler = (events: readonly ReceivedEvent[]) => Promise<void>;
export type Unsubscribe = () => Promise<void>;

export interface SubscribeOptions {
  /**
   * true (default): a named durable queue that keeps messages while the subscriber is away,
   * acknowledged after processing, requeued on failure, dead-lettered after `maxFailures`.
   * false: a queue of this process only, gone when it stops (live feeds such as subscriptions).
   */
  durable?: boolean;
  /** Messages processed at once (the AMQP prefetch). */
  concurrency?: number;
}

export interface EventBus {
  readonly kind: "memory" | "amqp";
  /** Resolves once every event is accepted (the broker's confirm); rejects if any is not. */
  publish(events: readonly BusEvent[]): Promise<void>;
  subscribe(name: string, handler: EventHandler, opts?: SubscribeOptions): Promise<Unsubscribe>;
  /**
   * A durable subscription whose handler takes up to `maxBatch` messages at once. Each message is
   * still acknowledged on its own: when a batch fails, its messages are retried one by one, so
   * only a message that fails alone is retried again and, at last, dead-lettered.
   */
  subscribeBatches(name: string, handler: BatchHandler, opts: { maxBatch: number }): Promise<Unsubscribe>;
  /**
   * Whether a publish can be confirmed now: the broker connection is up (the in-process bus always
   * is). The relay publishes nothing while it is false: the outbox keeps the events meanwhile.
   */
  isConnected(): boolean;
  /** Calls `listener` each time the broker connection is (re)established; returns its removal. */
  onConnect(listener: () => void): () => void;
  /**
   * Resolves once the bus can take another batch without its queues in this process's memory
   * growing past their bound (the in-process bus: a subscriber slower than the writes makes the
   * relay wait, and the events wait in the outbox meanwhile). Absent where the broker keeps the
   * backlog (RabbitMQ).
   */
  whenRoom?(): Promise<void>;
  close(): Promise<void>;
  /** The broker connection's state (GET /healthz, /metrics); the in-process bus has none. */
  dependencyState?(): DependencyState;
}

/** A publish refused or abandoned because the broker is not connected (the relay retries later). */
export class BusUnavailableError extends Error {
  constructor(message = "the event broker is not connected") {
    super(message);
    this.name = "BusUnavailableError";
  }
}

/** Bodies parsed already: the in-process bus hands one body to every subscriber. */
const parsed = new WeakMap<Buffer, Readonly<OutboxMessage>>();

/** The message of an event, parsed once per body (subscribers only read it). */
export function parseMessage(event: BusEvent): Readonly<OutboxMessage> {
  let message = parsed.get(event.body);
  if (!message) {
    message = JSON.parse(event.body.toString("utf8")) as OutboxMessage;
    parsed.set(event.body, message);
  }
  return message;
}

export interface MemoryBusOptions {
  maxFailures: number;
  /**
   * Messages a subscriber's queue may hold before `whenRoom` makes the publisher wait (default
   * 10,000). Queues without a subscriber attached are not counted: nothing drains them.
   */
  maxQueued?: number;
  /** Called with a message that failed `maxFailures` times. */
  onDeadLetter?: (queue: string, event: ReceivedEvent, err: unknown) => void;
  onError?: (queue: string, event: ReceivedEvent, err: unknown) => void;
}

interface MemoryQueue {
  name: string;
  items: ReceivedEvent[];
  /** Takes the messages one at a time (up to `concurrency` at once) or in batches of `maxBatch`. */
  handler: { each: EventHandler } | { batch: BatchHandler; maxBatch: number } | null;
  concurrency: number;
  running: number;
  dead: ReceivedEvent[];
}

/**
 * The in-process bus: a queue per subscriber, filled by publish and drained by its handler with
 * the same rules as the broker (ack after processing, retried on failure, dead-lettered after
 * `maxFailures`). Durable queues keep their messages while no handler is attached.
 */
export function createMemoryBus(opts: MemoryBusOptions): EventBus & {
  deadLetters(name: string): readonly ReceivedEvent[];
  /** Messages waiting in a queue (not counting those its subscriber is processing). */
  queued(name: string): number;
} {
  const queues = new Map<string, MemoryQueue>();
  const maxQueued = Math.max(1, opts.maxQueued ?? 10_000);
  let closed = false;
  let anonymous = 0;
  /** Publishers waiting for room (whenRoom), told when every attached queue is below the bound. */
  let roomWaiters: Array<() => void> = [];

  const hasRoom = () => {
    if (closed) return true;
    for (const q of queues.values()) if (q.handler && q.items.length >= maxQueued) return false;
    return true;
  };
  const tellRoom = () => {
    if (roomWaiters.length === 0 || !hasRoom()) return;
    const waiters = roomWaiters;
    roomWaiters = [];
    for (const w of waiters) w();
  };

  /** A failed delivery: retried later (at the queue's front), or dead-lettered at last. */
  const failed = (q: MemoryQueue, event: ReceivedEvent, err: unknown): ReceivedEvent | null => {
    opts.onError?.(q.name, event, err);
    if (event.attempt < opts.maxFailures) return { ...event, attempt: event.attempt + 1 };
    q.dead.push(event);
    opts.onDeadLetter?.(q.name, event, err);
    return null;
  };

  // A failing handler is retried after a short pause, not in a hot loop.
  const pumpLater = (q: MemoryQueue, attempt: number) => setTimeout(() => pump(q), 10 * attempt).unref();

  const pump = (q: MemoryQueue) => {
    const h = q.handler;
    if (closed || !h) return;
    if ("batch" in h) {
      if (q.running > 0 || q.items.length === 0) return;
      q.running = 1;
      const batch = q.items.splice(0, h.maxBatch);
      tellRoom();
      void runBatch(q, h.batch, batch).then((retries) => {
        q.running = 0;
        if (retries.length === 0) return pump(q);
        q.items.unshift(...retries);
        pumpLater(q, Math.max(...retries.map((e) => e.attempt - 1)));
      });
      return;
    }
    while (q.running < q.concurrency && q.items.length > 0) {
      const event = q.items.shift()!;
      tellRoom();
      q.running++;
      h.each(event).then(
        () => {
          q.running--;
          pump(q);
        },
        (err) => {
          q.running--;
          const retry = failed(q, event, err);
          if (retry) q.items.unshift(retry);
          pumpLater(q, event.attempt);
        },
      );
    }
  };

  /**
   * One call for the batch; when it fails, one call per message, so that only the messages that
   * fail alone are retried (returned, in order) or dead-lettered.
   */
  const runBatch = async (
    q: MemoryQueue,
    handle: BatchHandler,
    batch: ReceivedEvent[],
  ): Promise<ReceivedEvent[]> => {
    try {
      await handle(batch);
      return [];
    } catch (err) {
      if (batch.length === 1) {
        const retry = failed(q, batch[0]!, err);
        return retry ? [retry] : [];
      }
    }
    const retries: ReceivedEvent[] = [];
    for (const event of batch) {
      try {
        await handle([event]);
      } catch (err) {
        const retry = failed(q, event, err);
        if (retry) retries.push(retry);
      }
    }
    return retries;
  };

  const attach = (
    name: string,
    durable: boolean,
    handler: NonNullable<MemoryQueue["handler"]>,
    concurrency: number,
  ): Unsubscribe => {
    const key = durable ? name : `${name}#${++anonymous}`;
    let q = queues.get(key);
    if (!q) {
      q = { name: key, items: [], handler: null, concurrency: 1, running: 0, dead: [] };
      queues.set(key, q);
    }
    if (q.handler) throw new Error(`the queue ${key} has a subscriber already`);
    q.handler = handler;
    q.concurrency = Math.max(1, concurrency);
    const queue = q;
    pump(queue);
    return async () => {
      queue.handler = null;
      if (!durable) queues.delete(key);
      // A queue nobody drains no longer holds the publisher back.
      tellRoom();
    };
  };

  return {
    kind: "memory",
    async publish(events) {
      if (closed) throw new Error("the event bus is closed");
      // One received message per event, shared by the queues (handlers only read it; a retry
      // makes a copy with its attempt).
      const received = events.map((e): ReceivedEvent => ({ ...e, attempt: 1 }));
      for (const q of queues.values()) {
        for (const e of received) q.items.push(e);
        pump(q);
      }
    },
    async subscribe(name, handler, subOpts = {}) {
      return attach(name, subOpts.durable ?? true, { each: handler }, subOpts.concurrency ?? 1);
    },
    async subscribeBatches(name, handler, batchOpts) {
      return attach(name, true, { batch: handler, maxBatch: Math.max(1, batchOpts.maxBatch) }, 1);
    },
    deadLetters(name) {
      return queues.get(name)?.dead ?? [];
    },
    queued(name) {
      return queues.get(name)?.items.length ?? 0;
    },
    whenRoom() {
      if (hasRoom()) return Promise.resolve();
      return new Promise<void>((resolve) => roomWaiters.push(resolve));
    },
    isConnected: () => !closed,
    onConnect: () => () => {},
    async close() {
      closed = true;
      tellRoom();
    },
  };
}
