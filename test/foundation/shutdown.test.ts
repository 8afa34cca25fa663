// Graceful shutdown: app.close() while a request is in flight lets that request finish; new
// connections are refused meanwhile. A real port and fetch, no inject.
import { describe, expect, it } from "vitest";
import { BACKENDS, createTestApp } from "../helpers/env.ts";

describe.each(BACKENDS)("graceful shutdown on %s", (backend) => {
  it("a request in flight when close() starts is answered; close() waits for it", async () => {
    const t = await createTestApp(backend);
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    // Hold a lock that /readyz's migrations check needs, so the request stays in flight.
    let locked!: () => void;
    const lockTaken = new Promise<void>((r) => {
      locked = r;
    });
    const holder = t.services.db.transaction(async (tx) => {
      await tx.query(`LOCK TABLE "_dimensio_migrations" IN ACCESS EXCLUSIVE MODE`);
      locked();
      await gate;
    });
    try {
      await lockTaken;
      await t.app.listen({ port: 0, host: "127.0.0.1" });
      const address = t.app.server.address();
      if (!address || typeof address === "string") throw new Error("no port");
      const base = `http://127.0.0.1:${address.port}`;

      const events: string[] = [];
      const inFlight = fetch(`${base}/readyz`).then(async (res) => {
        events.push("response");
        return { status: res.status, body: await res.json() };
      });
      await new Promise((r) => setTimeout(r, 300));
      expect(events).toEqual([]);

      const closing = t.app.close().then(() => events.push("closed"));
      await new Promise((r) => setTimeout(r, 200));
      expect(events).toEqual([]);
      // No new connections while closing.
      await expect(fetch(`${base}/healthz`)).rejects.toThrow();

      const releasedAt = Date.now();
      release();
      const answered = await inFlight;
      await closing;
      // Closing does not wait for the keep-alive connection to time out.
      expect(Date.now() - releasedAt).toBeLessThan(3000);
      expect(answered).toEqual({
        status: 200,
        body: { status: "ready", checks: { database: "ok", migrations: "ok" } },
      });
      // close() did not finish before the request was released (checked above), and did after.
      expect([...events].sort()).toEqual(["closed", "response"]);
    } finally {
      release();
      await holder;
      await t.services.close();
    }
  });
});
