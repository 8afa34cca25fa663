// The request's event budget (src/resolvers/write/change-event.ts): an event's bytes spent exactly,
// or held at their largest before a statement that builds the event and settled to the exact
// size after it (released when it fails), so that the request's later writes see what was written.
import { describe, expect, it } from "vitest";
import { reserveEventBytes } from "../../src/resolvers/write/change-event.ts";
import type { WriteLimits } from "../../src/resolvers/write/context.ts";

const limitsOf = (maxBytes: number, usedBytes = 0): WriteLimits => ({
  fieldMaxBytes: 1024,
  events: { maxBytes, usedBytes },
});

describe("event bytes held for an event the database builds", () => {
  it("holds the bound, then counts the exact size once settled", () => {
    const limits = limitsOf(100, 10);
    const held = reserveEventBytes(limits, 60)!;
    expect(held).not.toBeNull();
    expect(limits.events.usedBytes).toBe(70);
    const payload = { A: "x" };
    held.settle(payload);
    expect(limits.events.usedBytes).toBe(10 + Buffer.byteLength(JSON.stringify(payload)));
  });

  it("gives the bound back when nothing was written, and holds nothing when it does not fit", () => {
    const limits = limitsOf(100, 10);
    reserveEventBytes(limits, 90)!.release();
    expect(limits.events.usedBytes).toBe(10);
    expect(reserveEventBytes(limits, 91)).toBeNull();
    expect(limits.events.usedBytes).toBe(10);
  });

  it("is settled or released once", () => {
    const held = reserveEventBytes(limitsOf(100), 50)!;
    held.release();
    expect(() => held.settle({})).toThrow(/once/);
    expect(() => held.release()).toThrow(/once/);
  });
});
