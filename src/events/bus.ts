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
}

export interface ReceivedEvent extends BusEvent {
  /** 1 on the first delivery to this subscriber, 2 after one failure, … */
  attempt: number;
}

export type EventHandler = (event: ReceivedEvent) => Promise<void>;
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
   * Whether a publish can be confirmed now: the broker connection is up (the in-process bus always
   * is). The relay publishes nothing while it is false: the outbox keeps the events meanwhile.
   */
  isConnected(): boolean;
  /** Calls `listener` each time the broker connection is (re)established; returns its removal. */
  onConnect(listener: () => void): () => void;
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
  /** Called with a message that failed `maxFailures` times. */
  onDeadLetter?: (queue: string, event: ReceivedEvent, err: unknown) => void;
  onError?: (queue: string, event: ReceivedEvent, err: unknown) => void;
}

interface MemoryQueue {
  name: string;
  items: ReceivedEvent[];
  handler: EventHandler | null;
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
} {
  const queues = new Map<string, MemoryQueue>();
  let closed = false;
  let anonymous = 0;

  const pump = (q: MemoryQueue) => {
    while (!closed && q.handler && q.running < q.concurrency && q.items.length > 0) {
      const event = q.items.shift()!;
      const handler = q.handler;
      q.running++;
      handler(event).then(
        () => {
          q.running--;
          pump(q);
        },
        (err) => {
          q.running--;
          opts.onError?.(q.name, event, err);
          if (event.attempt >= opts.maxFailures) {
            q.dead.push(event);
            opts.onDeadLetter?.(q.name, event, err);
          } else {
            q.items.unshift({ ...event, attempt: event.attempt + 1 });
          }
          // A failing handler is retried after a short pause, not in a hot loop.
          setTimeout(() => pump(q), 10 * event.attempt).unref();
        },
      );
    }
  };

  return {
    kind: "memory",
    async publish(events) {
      if (closed) throw new Error("the event bus is closed");
      for (const q of queues.values()) {
        for (const e of events) q.items.push({ ...e, attempt: 1 });
        pump(q);
      }
    },
    async subscribe(name, handler, subOpts = {}) {
      const durable = subOpts.durable ?? true;
      const key = durable ? name : `${name}#${++anonymous}`;
      let q = queues.get(key);
      if (!q) {
        q = { name: key, items: [], handler: null, concurrency: 1, running: 0, dead: [] };
        queues.set(key, q);
      }
      if (q.handler) throw new Error(`the queue ${key} has a subscriber already`);
      q.handler = handler;
      q.concurrency = Math.max(1, subOpts.concurrency ?? 1);
      const queue = q;
      pump(queue);
      return async () => {
        queue.handler = null;
        if (!durable) queues.delete(key);
      };
    },
    deadLetters(name) {
      return queues.get(name)?.dead ?? [];
    },
    isConnected: () => !closed,
    onConnect: () => () => {},
    async close() {
      closed = true;
    },
  };
}
