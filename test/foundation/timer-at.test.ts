// timerAt (src/timer-at.ts): fires at a moment of the service's clock, in steps when the moment is
// beyond setTimeout's longest delay (a token valid for a month), at once when it is past, never
// once cancelled. The clock is the injected one; setTimeout's time is vitest's fake clock.
import { afterEach, beforeEach, describe, expect, it, vi } from "vitest";
import { timerAt } from "../../src/timer-at.ts";

const MAX_DELAY_MS = 2 ** 31 - 1;

describe("timerAt", () => {
  beforeEach(() => {
    vi.useFakeTimers({ now: new Date("2026-01-01T00:00:00Z") });
  });
  afterEach(() => {
    vi.useRealTimers();
  });
  const clock = () => new Date();

  it("fires at a moment past setTimeout's longest delay, waiting for it in steps", () => {
    const fired: number[] = [];
    const start = Date.now();
    timerAt(start + MAX_DELAY_MS + 5_000, clock, () => fired.push(Date.now() - start));
    vi.advanceTimersByTime(MAX_DELAY_MS);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(4_999);
    expect(fired).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(fired).toEqual([MAX_DELAY_MS + 5_000]);
  });

  it("fires at once, before it returns, for a moment already past", () => {
    let fired = false;
    timerAt(Date.now() - 1, clock, () => {
      fired = true;
    });
    expect(fired).toBe(true);
  });

  it("never fires once cancelled, in its first step or a later one", () => {
    let fired = 0;
    timerAt(Date.now() + 1_000, clock, () => fired++).cancel();
    const far = timerAt(Date.now() + MAX_DELAY_MS + 1_000, clock, () => fired++);
    vi.advanceTimersByTime(MAX_DELAY_MS + 10);
    far.cancel();
    vi.advanceTimersByTime(10_000);
    expect(fired).toBe(0);
    expect(vi.getTimerCount()).toBe(0);
  });
});
