// GraphQL over WebSocket (graphql-transport-ws) through a ROLE=gateway process in front of write and
// auth backends, with a relay publishing to RabbitMQ (operator finding 4: the upgrade was forwarded
// as a plain GET and answered 401 TOKEN_MISSING): the `graphql-ws` client runs a query and a
// subscription receives the event of a create made through the same gateway.
import { type Client, createClient, type FormattedExecutionResult } from "graphql-ws";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { eventually } from "../events/support.ts";
import { loginOverHttp, SAMPLE_USERS } from "../helpers/auth.ts";
import { TEST_AMQP_URL, TEST_DATABASE_URL } from "../helpers/env.ts";
import { printLogsOnFailure, startTopology, type Topology } from "../helpers/topology.ts";

// Defined where PostgreSQL and RabbitMQ run (a subscription's events come through the broker).
if (TEST_DATABASE_URL && TEST_AMQP_URL)
  describe("GraphQL over WebSocket through the gateway (processes)", () => {
    let topology: Topology;
    let token: string;
    const clients: Client[] = [];

    beforeAll(async () => {
      const events = {
        AMQP_URL: TEST_AMQP_URL!,
        EVENTS_EXCHANGE: `dimensio.test.gateway-ws.${process.pid}`,
        EVENTS_POLL_MS: "100",
      };
      // No read backend is needed here: nothing in these tests is a GET to the API (the gateway's
      // reads go to write).
      topology = await startTopology({
        roles: ["gateway", "write", "auth", "relay"],
        roleEnv: { write: events, relay: events },
      });
      const { username, password } = SAMPLE_USERS.anna;
      token = await loginOverHttp(topology.url("gateway"), username, password);
    }, 90_000);
    afterAll(async () => {
      for (const c of clients) await c.dispose();
      await topology?.stop();
    });
    printLogsOnFailure(() => topology);

    const client = (wsPath: string) => {
      const c = createClient({
        url: `ws://127.0.0.1:${topology.port("gateway")}${wsPath}`,
        webSocketImpl: WebSocket,
        retryAttempts: 0,
        lazy: true,
        connectionParams: { authorization: `Bearer ${token}` },
      });
      clients.push(c);
      return c;
    };

    it("a query over graphql-ws through the gateway answers (on /graphql and /api/v4/graphql)", async () => {
      for (const wsPath of ["/graphql", "/api/v4/graphql"]) {
        const results: FormattedExecutionResult<Record<string, unknown>, unknown>[] = [];
        for await (const result of client(wsPath).iterate({
          query: `{ CITY(source: "anag-3", limit: 1) { data { CITY_ID NAME } } }`,
        }))
          results.push(result);
        expect(results, wsPath).toHaveLength(1);
        expect(results[0]!.errors, wsPath).toBeUndefined();
        expect((results[0]!.data as { CITY: { data: unknown[] } }).CITY.data, wsPath).toHaveLength(1);
      }
    });

    it("a subscription over graphql-ws through the gateway receives the event of a create", async () => {
      const events: FormattedExecutionResult<Record<string, unknown>, unknown>[] = [];
      let failed: unknown = null;
      const unsubscribe = client("/graphql").subscribe(
        { query: `subscription { CITY_events(source: "anag-3") { event_type record_id } }` },
        {
          next: (result) => void events.push(result),
          error: (err) => {
            failed = err;
          },
          complete: () => {},
        },
      );
      try {
        // Live once an event arrives: cities are created through the gateway until one does.
        const created: string[] = [];
        await eventually(
          async () => {
            if (failed) throw new Error(`the subscription failed: ${JSON.stringify(failed)}`);
            if (events.length) return true;
            const id = `WS${created.length}`;
            const res = await fetch(`${topology.url("gateway")}/api/v4/core/CITY?source=anag-3`, {
              method: "POST",
              headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
              body: JSON.stringify({ data: { CITY_ID: id, NAME: `WebSocket ${id}`, COUNTRY: "IT" } }),
            });
            expect(res.status).toBe(201);
            created.push(id);
            return eventually(() => events.length > 0, { timeoutMs: 1000, what: "an event" }).catch(
              () => false,
            );
          },
          { timeoutMs: 30_000, what: "the subscription's first event" },
        );
        expect(events[0]!.errors).toBeUndefined();
        const event = (events[0]!.data as { CITY_events: { event_type: string; record_id: string } })
          .CITY_events;
        expect(event.event_type).toBe("CITYCreated");
        expect(created).toContain(event.record_id);
      } finally {
        unsubscribe();
      }
    });
  });
