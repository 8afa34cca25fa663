// GET /metrics (decisions.md §16, issue 13): Prometheus text format, parsed here by an independent
// parser; request counts and latency per route and status, rate-limit refusals, the database pool,
// the outbox backlog, publish latency, webhook deliveries and GraphQL operations.
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { eventually, webhookReceiver } from "../events/support.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, client, NO_RATE_LIMITS } from "../write/http.ts";

describe.each(BACKENDS)("metrics (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let token: string;
  let runtime: EventRuntime;
  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        RATE_LIMIT_USER_PER_MINUTE: "5",
        WEBHOOK_ALLOW_PRIVATE: "true",
        EVENTS_POLL_MS: "60000",
      },
    });
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    anna = client(t.app, token);
    runtime = await startEventRuntime(t.services, { relay: true, webhooks: true });
  });
  afterAll(async () => {
    await runtime?.stop();
    await t?.close();
  });

  const scrape = async () => {
    const res = await t.app.inject({ method: "GET", url: "/metrics" });
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toMatch(/^text\/plain; version=0\.0\.4/);
    return parsePrometheusTextFormat(res.body);
  };
  const family = (families: ReturnType<typeof parsePrometheusTextFormat>, name: string) => {
    const f = families.find((x) => x.name === name);
    if (!f) throw new Error(`no metric ${name}`);
    return f;
  };

  it("counts requests per route and status, refusals, events, deliveries and GraphQL operations", async () => {
    const receiver = await webhookReceiver();
    try {
      expect(
        (await anna.post("/api/v4/webhooks", { url: receiver.url, events: ["CITYCreated"] })).status,
      ).toBe(201);
      expect(
        (
          await anna.post("/api/v4/core/CITY?source=anag-3", {
            data: { CITY_ID: "MX", NAME: "Metrics", COUNTRY: "IT" },
          })
        ).status,
      ).toBe(201);
      expect(
        (await graphqlClient(t.app, token)(`{ CITY(source: "anag-3", limit: 1) { data { CITY_ID } } }`))
          .status,
      ).toBe(200);
      // Past 5 a minute: refused (10 tries: a 429 even if a minute boundary falls in between).
      const statuses = [];
      for (let i = 0; i < 10; i++) statuses.push((await anna.get("/api/v4/core/CITY?source=anag-3")).status);
      expect(statuses).toContain(429);
      await receiver.waitFor(1);
      const families = await eventually(
        async () => {
          const f = await scrape();
          const deliveries = family(f, "dimensio_webhook_deliveries_total").metrics;
          return deliveries.some((m) => m.labels?.status === "success" && Number(m.value) >= 1)
            ? f
            : undefined;
        },
        { what: "the delivery counted" },
      );
      const requests = family(families, "dimensio_http_requests_total");
      expect(requests.type).toBe("COUNTER");
      const created = requests.metrics.find(
        (m) =>
          m.labels?.route === "/api/v4/core/:dim" &&
          m.labels?.method === "POST" &&
          m.labels?.status === "201",
      );
      expect(Number(created?.value)).toBeGreaterThanOrEqual(1);
      expect(requests.metrics.find((m) => m.labels?.status === "429")).toBeDefined();
      const latency = family(families, "dimensio_http_request_duration_seconds");
      expect(latency.type).toBe("HISTOGRAM");
      // (this parser keeps a histogram's buckets, not its labels or count)
      expect(latency.metrics.some((m) => Number(m.buckets?.["+Inf"]) >= 1)).toBe(true);
      expect(
        Number(family(families, "dimensio_rate_limit_refusals_total").metrics[0]?.value),
      ).toBeGreaterThanOrEqual(1);
      expect(
        Number(family(families, "dimensio_events_published_total").metrics[0]?.value),
      ).toBeGreaterThanOrEqual(1);
      expect(
        Number(family(families, "dimensio_event_publish_latency_seconds").metrics[0]?.buckets?.["+Inf"]),
      ).toBeGreaterThanOrEqual(1);
      expect(family(families, "dimensio_outbox_backlog").metrics[0]?.value).toBeDefined();
      expect(family(families, "dimensio_db_pool_connections").metrics.length).toBeGreaterThanOrEqual(1);
      const ops = family(families, "dimensio_graphql_operations_total").metrics;
      expect(Number(ops.find((m) => m.labels?.operation === "query")?.value)).toBeGreaterThanOrEqual(1);
      expect(created?.labels?.role).toBe("all");
      // The process's own metrics, prefixed once (not dimensio_process_process_…).
      expect(
        Number(family(families, "dimensio_process_cpu_user_seconds_total").metrics[0]?.value),
      ).toBeGreaterThan(0);
      expect(
        Number(family(families, "dimensio_nodejs_heap_size_used_bytes").metrics[0]?.value),
      ).toBeGreaterThan(0);
      expect(families.some((f) => f.name.startsWith("dimensio_process_process_"))).toBe(false);
    } finally {
      await receiver.close();
    }
  });
});

// METRICS_TOKEN: /metrics of a process on the public network (ROLE=all is the one-machine default)
// answers only a scraper with the token; without it, anyone who reaches the port.
describe("GET /metrics with METRICS_TOKEN (pglite)", () => {
  let t: TestApp;
  const TOKEN = "scrape-token-0123456789";
  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, METRICS_TOKEN: TOKEN },
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  it("answers only Authorization: Bearer <METRICS_TOKEN>; others get 403 METRICS_TOKEN_REQUIRED in the standard body", async () => {
    for (const authorization of [
      undefined,
      "Bearer wrong-token-0123456789",
      `Basic ${TOKEN}`,
      `Bearer ${TOKEN}x`,
    ]) {
      const res = await t.app.inject({
        method: "GET",
        url: "/metrics",
        headers: authorization === undefined ? {} : { authorization },
      });
      expect(res.statusCode, String(authorization)).toBe(403);
      expect(res.json()).toEqual({
        error: "PermissionDenied",
        code: "METRICS_TOKEN_REQUIRED",
        status: 403,
        message:
          "/metrics answers a scraper that sends Authorization: Bearer <METRICS_TOKEN>: configure the scraper with it.",
      });
    }
    const res = await t.app.inject({
      method: "GET",
      url: "/metrics",
      headers: { authorization: `Bearer ${TOKEN}` },
    });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain("dimensio_http_requests_total");
  });
});
