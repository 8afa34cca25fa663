// Events of a database profile on the bus (decisions.md §18): a message carries the profile whose
// outbox it came from (the in-process bus as it is, RabbitMQ in the `database` header), and the
// live feed tells apart two databases' events with the same OUTBOX_ID.
import { randomBytes } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { createAmqpBus } from "../../src/events/amqp-bus.ts";
import { type BusEvent, createMemoryBus, type EventBus, type ReceivedEvent } from "../../src/events/bus.ts";
import { createEventFeed } from "../../src/events/feed.ts";
import { createLogger } from "../../src/logger.ts";
import { TEST_AMQP_URL } from "../helpers/env.ts";
import { eventually } from "../events/support.ts";

const silent = createLogger("silent");

function event(id: string, database?: string): BusEvent {
  const body = {
    OUTBOX_ID: id,
    EVENT_TYPE: "CITYCreated",
    AGGREGATE_TYPE: "CITY",
    AGGREGATE_ID: `C-${database ?? "main"}`,
    PAYLOAD: {},
    CREATED_AT: new Date(0).toISOString(),
    TENANT_ID: "globex",
  };
  return {
    id,
    type: "CITYCreated",
    tenantId: "globex",
    dimension: "CITY",
    timestamp: new Date(0),
    body: Buffer.from(JSON.stringify(body)),
    ...(database ? { database } : {}),
  };
}

const KINDS: Array<{ name: string; open: () => EventBus }> = [
  { name: "in-process", open: () => createMemoryBus({ maxFailures: 3 }) },
];
if (TEST_AMQP_URL)
  KINDS.push({
    name: "RabbitMQ",
    open: () =>
      createAmqpBus({
        url: TEST_AMQP_URL!,
        exchange: `dimensio.test.${randomBytes(4).toString("hex")}`,
        maxFailures: 3,
        logger: silent,
      }),
  });

describe.each(KINDS)("events of a database profile on the bus ($name)", (kind) => {
  const opened: EventBus[] = [];
  afterAll(async () => {
    for (const b of opened) await b.close();
  });

  it("a message carries its database; the feed passes two databases' events with one id", async () => {
    const bus = kind.open();
    opened.push(bus);
    const received: ReceivedEvent[] = [];
    await bus.subscribe("tenants-test", async (e) => {
      received.push(e);
    });
    const feed = createEventFeed(bus, silent);
    const fed: string[] = [];
    await feed.listen((m) => fed.push(m.AGGREGATE_ID));
    await bus.publish([event("7"), event("7", "EU")]);
    await eventually(() => received.length === 2 && fed.length === 2, { what: "both messages" });
    expect(received.map((e) => [e.id, e.database])).toEqual([
      ["7", undefined],
      ["7", "EU"],
    ]);
    expect(fed).toEqual(["C-main", "C-EU"]);
    await feed.close();
  });
});
