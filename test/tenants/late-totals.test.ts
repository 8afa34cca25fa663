// A profile's totals cache is made in the background (its LISTEN needs the profile's database):
// nothing is kept until it is there, a mark taken before is not honoured, and a database that did
// not answer is tried again until the cache is made.
import { describe, expect, it } from "vitest";
import { NO_TOTALS_CACHE, type TotalsCache } from "../../src/resolvers/read/totals-cache.ts";
import { lateTotals } from "../../src/tenant-databases.ts";
import { eventually } from "../events/support.ts";

/** A cache that keeps everything it is given (marks always honoured). */
function keepingCache(): TotalsCache {
  const kept = new Map<string, { total: number; estimated: boolean }>();
  return {
    ...NO_TOTALS_CACHE,
    get: (key) => kept.get(key),
    mark: () => 1,
    set: (key, total) => void kept.set(key, total),
    size: () => kept.size,
  };
}

describe("a profile's totals cache made late", () => {
  it("keeps nothing until made, ignores earlier marks, and is tried again after a failure", async () => {
    const errors: unknown[] = [];
    let attempts = 0;
    let made: (cache: TotalsCache) => void = () => {};
    const totals = lateTotals(
      () => {
        attempts++;
        if (attempts === 1) return Promise.reject(new Error("connect ECONNREFUSED"));
        return new Promise<TotalsCache>((resolve) => {
          made = resolve;
        });
      },
      (err) => errors.push(err),
      10,
    );
    const early = totals.mark();
    totals.set("k", { total: 5, estimated: false }, early);
    expect(totals.get("k")).toBeUndefined();
    await eventually(() => attempts === 2, { what: "the second attempt" });
    expect(errors).toHaveLength(1);
    made(keepingCache());
    await eventually(() => totals.mark() !== early, { what: "the cache" });
    // A total counted before the cache was there is not kept; one counted after is.
    totals.set("k", { total: 5, estimated: false }, early);
    expect(totals.get("k")).toBeUndefined();
    totals.set("k", { total: 6, estimated: false }, totals.mark());
    expect(totals.get("k")).toEqual({ total: 6, estimated: false });
    await totals.stop();
  });
});
