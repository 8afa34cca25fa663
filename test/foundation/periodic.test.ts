// The periodic job under the history retention and PGlite's statistics (src/periodic.ts): rounds
// never overlap, a failed round is told and the schedule goes on, stop waits for the round under
// way, and an interval of 0 runs nothing.
import { describe, expect, it } from "vitest";
import { startPeriodic } from "../../src/periodic.ts";

/** A promise and its resolver. */
function deferred<T = void>() {
  let resolve!: (v: T) => void;
  const promise = new Promise<T>((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

describe("startPeriodic", () => {
  it("runs round after round, the next scheduled once the previous ended; a failure is told and the rounds go on", async () => {
    let inRound = 0;
    let mostAtOnce = 0;
    let rounds = 0;
    const errors: unknown[] = [];
    const results: number[] = [];
    const third = deferred();
    const job = startPeriodic({
      intervalMs: 1,
      round: async () => {
        rounds++;
        inRound++;
        mostAtOnce = Math.max(mostAtOnce, inRound);
        // A round longer than the interval: an interval timer would start the next one now.
        await new Promise((r) => setTimeout(r, 5));
        inRound--;
        if (rounds === 2) throw new Error("round 2 failed");
        if (rounds === 3) third.resolve();
        return rounds;
      },
      onDone: (n) => results.push(n),
      onError: (err) => errors.push(err),
    });
    await third.promise;
    await job.stop();
    expect(mostAtOnce).toBe(1);
    expect(errors).toEqual([new Error("round 2 failed")]);
    expect(results.slice(0, 2)).toEqual([1, 3]);
    expect(job.stopped).toBe(true);
  });

  it("stop waits for the round under way and no round starts after it", async () => {
    const started = deferred();
    const release = deferred();
    let rounds = 0;
    let ended = false;
    const job = startPeriodic({
      intervalMs: 1,
      round: async () => {
        rounds++;
        started.resolve();
        await release.promise;
        ended = true;
      },
      onError: () => {},
    });
    await started.promise;
    const stopping = job.stop();
    expect(job.stopped).toBe(true);
    let stopped = false;
    void stopping.then(() => {
      stopped = true;
    });
    await Promise.resolve();
    expect(stopped).toBe(false);
    release.resolve();
    await stopping;
    expect(ended).toBe(true);
    // Past its interval many times over, no further round ran.
    await new Promise((r) => setTimeout(r, 20));
    expect(rounds).toBe(1);
  });

  it("an interval of 0 runs no round", async () => {
    let rounds = 0;
    const job = startPeriodic({
      intervalMs: 0,
      round: async () => {
        rounds++;
      },
      onError: () => {},
    });
    await new Promise((r) => setTimeout(r, 20));
    await job.stop();
    expect(rounds).toBe(0);
  });
});
