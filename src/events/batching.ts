// Batches gathered from a queue that delivers messages one at a time (RabbitMQ's, whose prefetch
// hands out up to `maxBatch` at once): they are processed together, so a burst of writes costs a
// subscriber a statement or a transaction per batch instead of one per event. Each event is still
// acknowledged on its own: when a batch fails, its events are retried one by one, so only the
// event that fails is requeued (and, at last, dead-lettered). The in-process bus hands its batches
// over itself (src/events/bus.ts, subscribeBatches).
import type { BatchHandler, EventHandler, ReceivedEvent } from "./bus.ts";

export type { BatchHandler } from "./bus.ts";

interface Pending {
  event: ReceivedEvent;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * A per-event handler for a bus queue made from a batch handler. Events that arrive while a batch
 * runs, or in the same turn of the event loop, form the next batch (at most `maxBatch`).
 */
export function inBatches(handleBatch: BatchHandler, opts: { maxBatch: number }): EventHandler {
  const pending: Pending[] = [];
  let scheduled = false;
  let running = false;

  const alone = async (p: Pending) => {
    try {
      await handleBatch([p.event]);
      p.resolve();
    } catch (err) {
      p.reject(err);
    }
  };

  const run = async () => {
    scheduled = false;
    if (running || pending.length === 0) return;
    running = true;
    const batch = pending.splice(0, opts.maxBatch);
    try {
      await handleBatch(batch.map((p) => p.event));
      for (const p of batch) p.resolve();
    } catch (err) {
      if (batch.length === 1) batch[0]!.reject(err);
      else for (const p of batch) await alone(p);
    } finally {
      running = false;
      if (pending.length > 0) schedule();
    }
  };

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(run);
  };

  return (event) =>
    new Promise<void>((resolve, reject) => {
      pending.push({ event, resolve, reject });
      if (!running) schedule();
    });
}
