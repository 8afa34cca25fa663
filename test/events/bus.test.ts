// The bus seam (issue 10): both implementations deliver every message to every subscriber queue,
// retry a failing subscriber and dead-letter the message after EVENTS_MAX_FAILURES attempts.
import { randomBytes } from "node:crypto";
import { type AddressInfo, createServer, type Socket } from "node:net";
import amqplib from "amqplib";
import { afterAll, describe, expect, it } from "vitest";
import { createAmqpBus, subscriberQueue } from "../../src/events/amqp-bus.ts";
import { type BusEvent, createMemoryBus, type EventBus, type ReceivedEvent } from "../../src/events/bus.ts";
import { loadConfig } from "../../src/config.ts";
import { createLogger } from "../../src/logger.ts";
import { openBus } from "../../src/services.ts";
import { TEST_AMQP_URL } from "../helpers/env.ts";
import { eventually } from "./support.ts";

const MAX_FAILURES = 3;

function event(id: string): BusEvent {
  const body = {
    OUTBOX_ID: id,
    EVENT_TYPE: "CITYCreated",
    AGGREGATE_TYPE: "CITY",
    AGGREGATE_ID: `C${id}`,
    PAYLOAD: {},
    CREATED_AT: new Date().toISOString(),
    TENANT_ID: "acme",
  };
  return {
    id,
    type: "CITYCreated",
    tenantId: "acme",
    dimension: "CITY",
    timestamp: new Date(),
    body: Buffer.from(JSON.stringify(body)),
  };
}

interface Kind {
  name: string;
  open(exchange: string): EventBus;
  /** The message ids dead-lettered from a subscriber's queue. */
  deadLettered(bus: EventBus, exchange: string, subscriber: string): Promise<string[]>;
}

const KINDS: Kind[] = [
  {
    name: "in-process",
    open: () => createMemoryBus({ maxFailures: MAX_FAILURES }),
    deadLettered: async (bus, _exchange, subscriber) =>
      (bus as ReturnType<typeof createMemoryBus>).deadLetters(subscriber).map((e) => e.id),
  },
];
if (TEST_AMQP_URL) {
  KINDS.push({
    name: "RabbitMQ",
    open: (exchange) =>
      createAmqpBus({
        url: TEST_AMQP_URL!,
        exchange,
        maxFailures: MAX_FAILURES,
        logger: createLogger("silent"),
      }),
    deadLettered: async (_bus, exchange, subscriber) => {
      const conn = await amqplib.connect(TEST_AMQP_URL!);
      const ch = await conn.createChannel();
      const ids: string[] = [];
      for (;;) {
        const m = await ch.get(`${subscriberQueue(exchange, subscriber)}.dead`, { noAck: true });
        if (!m) break;
        ids.push(String(m.properties.messageId));
      }
      await conn.close();
      return ids;
    },
  });
}

/** The message ids dead-lettered from a subscriber's queue, once there are any. */
function firstDeadLetters(kind: Kind, bus: EventBus, exchange: string, subscriber: string) {
  return eventually(
    async () => {
      const ids = await kind.deadLettered(bus, exchange, subscriber);
      return ids.length ? ids : undefined;
    },
    { what: "the dead-lettered message" },
  );
}

describe.each(KINDS)("event bus ($name)", (kind) => {
  const opened: EventBus[] = [];
  afterAll(async () => {
    for (const b of opened) await b.close();
  });

  it("every subscriber queue gets every message; a failing one is retried, then dead-lettered", async () => {
    const exchange = `dimensio.test.${randomBytes(4).toString("hex")}`;
    const bus = kind.open(exchange);
    opened.push(bus);
    const good: string[] = [];
    const attempts: ReceivedEvent[] = [];
    await bus.subscribe("good", async (e) => {
      good.push(e.id);
    });
    await bus.subscribe("flaky", async (e) => {
      attempts.push(e);
      // "2" always fails; the others succeed.
      if (e.id === "2") throw new Error("cannot process");
    });
    await bus.publish([event("1"), event("2"), event("3")]);
    await eventually(() => good.length === 3, { what: "the good subscriber's messages" });
    expect(good).toEqual(["1", "2", "3"]);
    expect(await firstDeadLetters(kind, bus, exchange, "flaky")).toEqual(["2"]);
    await eventually(() => attempts.some((e) => e.id === "3"), {
      what: "the flaky subscriber's next message",
    });
    const tries = attempts.filter((e) => e.id === "2").map((e) => e.attempt);
    expect(tries).toEqual([1, 2, 3]);
    expect(
      attempts
        .filter((e) => e.id !== "2")
        .map((e) => e.id)
        .sort(),
    ).toEqual(["1", "3"]);
  });

  it("a batch subscriber takes the messages handed out at once together; a failing batch is retried message by message", async () => {
    const exchange = `dimensio.test.${randomBytes(4).toString("hex")}`;
    const bus = kind.open(exchange);
    opened.push(bus);
    const calls: Array<Array<[string, number]>> = [];
    const done: string[] = [];
    await bus.subscribeBatches(
      "batched",
      async (batch) => {
        calls.push(batch.map((e) => [e.id, e.attempt]));
        // "12" always fails: every batch holding it fails, and so does it alone.
        if (batch.some((e) => e.id === "12")) throw new Error("cannot process");
        done.push(...batch.map((e) => e.id));
      },
      { maxBatch: 50 },
    );
    const ids = ["11", "12", "13", "14", "15"];
    await bus.publish(ids.map(event));
    expect(await firstDeadLetters(kind, bus, exchange, "batched")).toEqual(["12"]);
    await eventually(() => done.length === 4, { what: "the other messages processed" });
    // Every other message processed once (the failed batch's calls count nothing).
    expect(done.sort()).toEqual(["11", "13", "14", "15"]);
    // "12" tried alone MAX_FAILURES times in all, its attempt counted up.
    const alone = calls.filter((c) => c.length === 1 && c[0]![0] === "12").map((c) => c[0]![1]);
    expect(alone.at(-1)).toBe(MAX_FAILURES);
    if (kind.name === "in-process") {
      // All five in the first call; then each alone; then "12" twice more (attempts 2 and 3).
      expect(calls.map((c) => c.length)).toEqual([5, 1, 1, 1, 1, 1, 1, 1]);
      expect(alone).toEqual([1, 2, 3]);
    }
  });
});

describe.runIf(TEST_AMQP_URL)("an orderly unsubscribe (RabbitMQ)", () => {
  it("lets the handlers in flight settle and their acks go out before the channel closes", async () => {
    const exchange = `dimensio.test.${randomBytes(4).toString("hex")}`;
    const bus = createAmqpBus({
      url: TEST_AMQP_URL!,
      exchange,
      maxFailures: MAX_FAILURES,
      logger: createLogger("silent"),
    });
    try {
      let release!: () => void;
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let started = false;
      let finished = false;
      const unsubscribe = await bus.subscribe("slow", async () => {
        started = true;
        await gate;
        finished = true;
      });
      await bus.publish([event("1")]);
      await eventually(() => started, { what: "the handler to start" });
      const stopping = unsubscribe();
      // The stop waits for the handler in flight instead of closing its channel under it.
      await new Promise((resolve) => setImmediate(resolve));
      expect(finished).toBe(false);
      release();
      await stopping;
      expect(finished).toBe(true);
      // Its ack went out before the channel closed: nothing waits in the queue to be redelivered.
      const conn = await amqplib.connect(TEST_AMQP_URL!);
      try {
        const ch = await conn.createChannel();
        const { messageCount } = await ch.checkQueue(subscriberQueue(exchange, "slow"));
        expect(messageCount).toBe(0);
        await ch.deleteQueue(subscriberQueue(exchange, "slow"));
        await ch.deleteQueue(`${subscriberQueue(exchange, "slow")}.dead`);
      } finally {
        await conn.close();
      }
    } finally {
      await bus.close();
    }
  });
});

describe("the broker connection of a service", () => {
  it("opens on the first subscription, not at start", async () => {
    // A TCP listener in the broker's place: it counts the connections it is offered.
    const offered: Socket[] = [];
    const server = createServer((socket) => offered.push(socket));
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
    const { port } = server.address() as AddressInfo;
    /** Resolves when the listener has accepted a connection that satisfies `which`. */
    const accepted = (which: (s: Socket) => boolean) =>
      new Promise<void>((resolve) => {
        if (offered.some(which)) return resolve();
        const check = () => {
          if (!offered.some(which)) return;
          server.off("connection", onConnection);
          resolve();
        };
        const onConnection = () => setImmediate(check);
        server.on("connection", onConnection);
      });
    const bus = openBus(
      loadConfig({ AMQP_URL: `amqp://guest:guest@127.0.0.1:${port}`, LOG_LEVEL: "silent" }),
      createLogger("silent"),
    );
    try {
      // Nothing connects while nothing is published or subscribed: an absence, so it is watched
      // for a bounded time (a bus that connects at start does so within a few milliseconds here).
      const early = await Promise.race([
        accepted(() => true).then(() => "connected"),
        new Promise((resolve) => setTimeout(() => resolve("quiet"), 750)),
      ]);
      expect(early).toBe("quiet");
      expect(offered).toHaveLength(0);
      void bus.subscribe("lazy-test", async () => {}).catch(() => {});
      await accepted(() => true);
      expect(offered).toHaveLength(1);
    } finally {
      for (const s of offered) s.destroy();
      await Promise.race([bus.close().catch(() => {}), new Promise((r) => setTimeout(r, 2000))]);
      server.close();
    }
  });
});
