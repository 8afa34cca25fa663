// Closing the server with a GraphQL subscription open over SSE (docs/deploy.md: on SIGTERM a process
// finishes what is in flight and exits): the subscription ends with one error result, 503
// SERVICE_CLOSING, its stream closes, and the close finishes; before, an open SSE stream held the
// process until the client left.
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { subscribe } from "./sse.ts";

describe("closing the server with an SSE subscription open (pglite)", () => {
  let t: TestApp;
  let base: string;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    await t.app.listen({ host: "127.0.0.1", port: 0 });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    token = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
  });
  afterAll(async () => {
    await t?.services.close();
  });

  it("ends the subscription with 503 SERVICE_CLOSING and lets the close finish", async () => {
    const sub = await subscribe(base, token, `subscription { CITY_events(source: "anag-3") { event_id } }`);
    expect(sub.status).toBe(200);
    // Admitted (a live subscription of the guard) before the close begins.
    const closing = t.app.close();
    const outcome = await Promise.race([
      closing.then(() => "closed"),
      new Promise((resolve) => setTimeout(() => resolve("still open after 10 s"), 10_000)),
    ]);
    expect(outcome).toBe("closed");
    await sub.closed;
    const errors = sub.events.flatMap((e) => e.data?.errors ?? []);
    expect(errors).toEqual([
      expect.objectContaining({
        extensions: expect.objectContaining({ code: "SERVICE_CLOSING", status: 503 }),
      }),
    ]);
  });
});
