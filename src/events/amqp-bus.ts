// The RabbitMQ bus (decisions.md §8): a durable fan-out exchange, persistent messages published
// with confirms, and one queue per subscriber. amqp-connection-manager reconnects and re-runs
// each channel's setup (exchange, queues, bindings, consumers) after a broker restart.
//
// Durable subscriber queues are classic durable queues with a dead-letter queue `<queue>.dead`:
// a message whose processing fails is nacked with requeue; after `maxFailures` failures (counted
// by the consumer per message id) it is nacked without requeue and the broker dead-letters it, so
// a poison message cannot block its queue. (Quorum queues count deliveries themselves, but their
// replicated log put ~40 ms on every confirmed publish on one node: see docs/benchmarks.md.)
//
// Broker faults (issue 18): a publish is refused at once while the broker is not ready (connected,
// every subscriber's queue set up), and the publishes in flight when the connection drops are
// rejected at once (the publishing channel is discarded with what it buffered), so the relay's
// transaction never waits on a broker that is gone and nothing is sent later behind the relay's
// back; the outbox keeps the events and the relay publishes them again, in order, once the broker
// is back. An ack or nack whose channel died with the connection is dropped (the broker redelivers
// the unacknowledged message to the new channel). A subscription made while the broker is
// unreachable returns at once and is set up when it is back, so a process starts (and takes
// writes) during an outage.
import { EventEmitter } from "node:events";
import amqp, { type AmqpConnectionManager, type ChannelWrapper } from "amqp-connection-manager";
import type { ConfirmChannel, ConsumeMessage } from "amqplib";
import type { Logger } from "../logger.ts";
import { inBatches } from "./batching.ts";
import {
  type BusEvent,
  BusUnavailableError,
  type EventBus,
  type EventHandler,
  type ReceivedEvent,
  type SubscribeOptions,
} from "./bus.ts";

export interface AmqpBusOptions {
  url: string;
  exchange: string;
  maxFailures: number;
  logger: Logger;
  /** A publish not confirmed within this long rejects (the relay then retries the batch). */
  publishTimeoutMs?: number;
}

function received(msg: ConsumeMessage, failures: number): ReceivedEvent {
  const p = msg.properties;
  const headers = (p.headers ?? {}) as Record<string, unknown>;
  return {
    id: String(p.messageId ?? ""),
    type: String(p.type ?? ""),
    tenantId: String(headers.tenant_id ?? ""),
    dimension: String(headers.dimension ?? ""),
    ...(typeof headers.database === "string" && headers.database !== ""
      ? { database: headers.database }
      : {}),
    timestamp: new Date(typeof p.timestamp === "number" ? p.timestamp * 1000 : Date.now()),
    body: msg.content,
    attempt: failures + 1,
  };
}

/** How long an unsubscribe waits for the handlers in flight to settle before closing the channel. */
const STOP_SETTLE_MS = 10_000;

/** The queue name of a durable subscriber. */
export function subscriberQueue(exchange: string, name: string): string {
  return `${exchange}.${name}`;
}

export function createAmqpBus(opts: AmqpBusOptions): EventBus & { connection: AmqpConnectionManager } {
  const { exchange, logger } = opts;
  // noDelay: without it Nagle's algorithm holds a publish behind the previous frame's delayed ACK
  // (about 40 ms per message once a consumer shares the connection).
  const connection = amqp.connect([opts.url], {
    heartbeatIntervalInSeconds: 5,
    reconnectTimeInSeconds: 1,
    // A broker that does not answer the connection fails the attempt within 5 s (then retried).
    connectionOptions: { noDelay: true, timeout: 5000 },
  });
  const channels = new Set<ChannelWrapper>();
  /** Subscriber channels set up (queues declared and bound, consuming) on the current connection. */
  const setUp = new Set<ChannelWrapper>();
  const connectListeners = new Set<() => void>();
  const connected = () => {
    for (const l of connectListeners) l();
  };
  /** Told of every change of the broker's state (subscribe waits on it). */
  const changes = new EventEmitter().setMaxListeners(0);
  // False once an attempt failed or the connection dropped, until the next connection.
  let reachable = true;
  let publisher: ChannelWrapper | null = null;
  connection.on("disconnect", ({ err }) => {
    logger.warn({ err: err?.message }, "event broker disconnected; events wait in the outbox");
    reachable = false;
    setUp.clear();
    // Its unconfirmed and buffered publishes are rejected now (not resent on reconnect): the relay
    // rolls back and publishes them again from the outbox.
    const dropped = publisher;
    publisher = null;
    if (dropped) setImmediate(() => dropped.close().catch(() => {}));
    changes.emit("change");
  });
  connection.on("connectFailed", ({ err }) => {
    logger.warn({ err: err?.message }, "event broker unreachable; retrying");
    reachable = false;
    changes.emit("change");
  });
  connection.on("connect", () => {
    logger.info("event broker connected");
    reachable = true;
    changes.emit("change");
    connected();
  });
  /**
   * Connected, and every subscriber's queue set up again: before that, a message published on a
   * first start could reach the fan-out exchange before the queue that should keep it exists.
   */
  const ready = () => connection.isConnected() && [...channels].every((c) => setUp.has(c));

  const declareExchange = (ch: ConfirmChannel) => ch.assertExchange(exchange, "fanout", { durable: true });

  const bus: EventBus & { connection: AmqpConnectionManager } = {
    kind: "amqp",
    connection,
    isConnected: ready,
    onConnect(listener) {
      const on = () => listener();
      connectListeners.add(on);
      return () => {
        connectListeners.delete(on);
      };
    },
    async publish(events) {
      if (!ready()) throw new BusUnavailableError();
      if (!publisher) {
        publisher = connection.createChannel({
          name: "relay",
          confirm: true,
          publishTimeout: opts.publishTimeoutMs ?? 10_000,
          setup: declareExchange,
        });
        // A channel's setup interrupted by a lost connection is retried on reconnect; the wrapper
        // reports it as an 'error' event, which must have a listener.
        publisher.on("error", (err) => logger.warn({ err: (err as Error).message }, "event broker channel"));
      }
      const ch = publisher;
      // One channel publishes in call order; every promise settles with the broker's confirm (or
      // rejects when the connection drops first).
      await Promise.all(
        events.map((e: BusEvent) =>
          ch.publish(exchange, "", e.body, {
            persistent: true,
            messageId: e.id,
            type: e.type,
            contentType: "application/json",
            timestamp: Math.floor(e.timestamp.getTime() / 1000),
            headers: {
              tenant_id: e.tenantId,
              dimension: e.dimension,
              ...(e.database ? { database: e.database } : {}),
            },
          }),
        ),
      );
    },
    async subscribe(name: string, handler: EventHandler, subOpts: SubscribeOptions = {}) {
      const durable = subOpts.durable ?? true;
      const queueName = subscriberQueue(exchange, name);
      // Failures per message id so far (bounded: the oldest forgotten first).
      const failures = new Map<string, number>();
      const remember = (key: string, n: number) => {
        failures.delete(key);
        failures.set(key, n);
        if (failures.size > 10_000) failures.delete(failures.keys().next().value as string);
      };
      // The consumer of the current channel, and the handlers still running: an orderly stop
      // cancels the consumer, lets them settle (their acks sent), then closes the channel.
      let consumer: { ch: ConfirmChannel; tag: string } | null = null;
      let running = 0;
      let settled: (() => void) | null = null;
      const channel = connection.createChannel({
        name: `subscriber ${name}`,
        setup: async (ch: ConfirmChannel) => {
          await declareExchange(ch);
          let queue: string;
          if (durable) {
            await ch.assertQueue(`${queueName}.dead`, { durable: true });
            await ch.assertQueue(queueName, {
              durable: true,
              arguments: {
                "x-dead-letter-exchange": "",
                "x-dead-letter-routing-key": `${queueName}.dead`,
              },
            });
            queue = queueName;
          } else {
            queue = (await ch.assertQueue("", { exclusive: true, autoDelete: true, durable: false })).queue;
          }
          await ch.bindQueue(queue, exchange, "");
          await ch.prefetch(Math.max(1, subOpts.concurrency ?? 1));
          // The channel of a delivery may be gone by the time its handler settles (the connection
          // dropped): amqplib then throws on ack/nack. Nothing is lost: the broker redelivers what
          // was not acknowledged, on the channel of the next connection.
          const settle = (what: "ack" | "nack", event: ReceivedEvent, fn: () => void) => {
            try {
              fn();
            } catch (err) {
              logger.info(
                { err: (err as Error).message, subscriber: name, event_id: event.id },
                `event broker: ${what} lost with its channel; the broker redelivers the message`,
              );
            }
          };
          const consumed = await ch.consume(queue, (msg) => {
            if (!msg) return;
            running++;
            const database = (msg.properties.headers as Record<string, unknown> | undefined)?.database;
            // OUTBOX_IDs are per database: a failure is remembered per database and id.
            const key = `${typeof database === "string" ? database : ""}:${String(msg.properties.messageId ?? "")}`;
            const event = received(msg, failures.get(key) ?? 0);
            Promise.resolve()
              .then(() => handler(event))
              .then(
                () => {
                  failures.delete(key);
                  settle("ack", event, () => ch.ack(msg));
                },
                (err) => {
                  logger.warn(
                    { err, subscriber: name, event_id: event.id, attempt: event.attempt },
                    "subscriber failed",
                  );
                  const giveUp = !durable || event.attempt >= opts.maxFailures;
                  if (giveUp) failures.delete(key);
                  else remember(key, event.attempt);
                  // Requeued, or (the last failure) dead-lettered to <queue>.dead.
                  settle("nack", event, () => ch.nack(msg, false, !giveUp));
                },
              )
              .finally(() => {
                running--;
                if (running === 0) settled?.();
              });
          });
          consumer = { ch, tag: consumed.consumerTag };
        },
      });
      channel.on("error", (err) =>
        logger.warn({ err: (err as Error).message, subscriber: name }, "event broker channel"),
      );
      channel.on("connect", () => {
        setUp.add(channel);
        changes.emit("change");
        connected();
      });
      channels.add(channel);
      // Resolves once the queue is set up; at once when the broker is unreachable (a process
      // started during an outage still starts: the setup runs when the broker is back, and
      // nothing is published before it has, see ready()).
      await new Promise<void>((resolve) => {
        const check = () => {
          if (!setUp.has(channel) && reachable) return;
          changes.off("change", check);
          resolve();
        };
        changes.on("change", check);
        check();
      });
      return async () => {
        // No new deliveries, then the ones being handled settle (at most STOP_SETTLE_MS): their
        // acks go out before the channel closes, instead of being redelivered to the next process.
        const current = consumer;
        consumer = null;
        if (current) await current.ch.cancel(current.tag).catch(() => {});
        if (running > 0)
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, STOP_SETTLE_MS);
            settled = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        channels.delete(channel);
        setUp.delete(channel);
        await channel.close();
      };
    },
    // A queue's prefetch is the batch: the messages handed out at once are processed together.
    subscribeBatches: (name, handler, batchOpts) =>
      bus.subscribe(name, inBatches(handler, batchOpts), { concurrency: batchOpts.maxBatch }),
    async close() {
      await Promise.all([...channels].map((c) => c.close().catch(() => {})));
      await publisher?.close().catch(() => {});
      await connection.close();
    },
  };
  return bus;
}
