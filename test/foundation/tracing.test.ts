// OpenTelemetry hooks (issue 13): with an SDK registered (here an in-memory exporter), every request
// is a server span named by its route pattern, continuing the caller's W3C trace; without one the
// hooks cost nothing and record nothing.
import { propagation, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe("tracing hooks", () => {
  let t: TestApp;
  let anna: Client;
  const exporter = new InMemorySpanExporter();
  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await clientFor(t.app, "anna");
  });
  afterAll(async () => {
    trace.disable();
    propagation.disable();
    await t?.close();
  });

  it("records nothing while no SDK is registered", async () => {
    expect((await anna.get("/api/v4/core/CITY?source=anag-3")).status).toBe(200);
    expect(exporter.getFinishedSpans()).toEqual([]);
  });

  it("with an SDK: a server span per request, named by the route, child of the caller's trace", async () => {
    trace.setGlobalTracerProvider(
      new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }),
    );
    propagation.setGlobalPropagator(new W3CTraceContextPropagator());
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const login = await t.app.inject({
      method: "POST",
      url: "/auth/login",
      payload: { username: "anna", password: "anna-secret-1" },
    });
    const token = login.json().data.access_token as string;
    const res = await t.app.inject({
      method: "GET",
      url: "/api/v4/core/CITY/MI?source=anag-3",
      headers: {
        authorization: `Bearer ${token}`,
        traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
      },
    });
    expect(res.statusCode).toBe(200);
    const span = exporter.getFinishedSpans().find((s) => s.name === "GET /api/v4/core/:dim/:id");
    expect(span).toBeDefined();
    expect(span!.spanContext().traceId).toBe(traceId);
    expect(span!.attributes).toMatchObject({
      "http.route": "/api/v4/core/:dim/:id",
      "http.response.status_code": 200,
    });
  });
});
