// A timer at a moment of the service's clock (a token's expiry): setTimeout holds at most about
// 24.8 days, so a later moment is waited for in steps, each read again off the clock. It does not
// keep the process alive. A moment already past fires at once, before `timerAt` returns.

/** setTimeout's longest delay (a signed 32-bit count of milliseconds). */
const MAX_DELAY_MS = 2 ** 31 - 1;

export interface TimerAt {
  /** Stops it; nothing fires after. */
  cancel(): void;
}

export function timerAt(epochMs: number, clock: () => Date, fire: () => void): TimerAt {
  let timer: NodeJS.Timeout | null = null;
  const arm = () => {
    const ms = epochMs - clock().getTime();
    if (ms > 0) {
      timer = setTimeout(arm, Math.min(ms, MAX_DELAY_MS));
      timer.unref();
      return;
    }
    timer = null;
    fire();
  };
  arm();
  return {
    cancel() {
      if (timer) clearTimeout(timer);
      timer = null;
    },
  };
}
