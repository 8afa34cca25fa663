// A job that runs a round every `intervalMs` (not on an interval: the next round is scheduled once
// the previous one ended, so rounds never overlap and a slow round delays the next), whose timer
// does not keep the process alive, and whose `stop` waits for a round under way.

export interface PeriodicJob {
  /** Stops the schedule and waits for a round under way; calling it again does nothing more. */
  stop(): Promise<void>;
  /** Whether `stop` was called (a long round checks it between its steps). */
  readonly stopped: boolean;
}

export interface PeriodicOptions<T> {
  /** Between the end of a round and the start of the next; 0 or less: no round ever runs. */
  intervalMs: number;
  /** One round. */
  round: () => Promise<T>;
  /** Told what a round gave back. */
  onDone?: (result: T) => void;
  /** Told why a round failed (the schedule goes on). */
  onError: (err: unknown) => void;
}

export function startPeriodic<T>(opts: PeriodicOptions<T>): PeriodicJob {
  let timer: NodeJS.Timeout | null = null;
  let running: Promise<unknown> | null = null;
  let stopped = false;

  function schedule() {
    if (stopped || opts.intervalMs <= 0) return;
    timer = setTimeout(() => {
      running = opts
        .round()
        .then((result) => opts.onDone?.(result), opts.onError)
        .finally(() => {
          running = null;
          schedule();
        });
    }, opts.intervalMs);
    timer.unref();
  }
  schedule();

  return {
    get stopped() {
      return stopped;
    },
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await running;
    },
  };
}
