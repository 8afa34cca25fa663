// The database watchdog (src/db/watchdog.ts) counts only the time the event loop was there to see
// an answer (issue 35 §6): a process that blocks its own loop for longer than the bound while
// PostgreSQL is fine does not declare the database down, and the probe's answer is timed from
// when its statement was sent. A silent server is still declared down within the bounds.
import { EventEmitter } from "node:events";
import { createServer, type Server, type Socket, connect } from "node:net";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { openPostgres } from "../../src/db/database.ts";
import { aliveClock, createWatchdog, type ProbeAttempt, type Watchdog } from "../../src/db/watchdog.ts";
import { TEST_DATABASE_URL } from "../helpers/env.ts";

/** Holds the event loop: the synchronous stretch of work the watchdog must not count. */
function blockLoop(ms: number): void {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    // busy: no timer, no I/O callback runs meanwhile
  }
}

/** A stand-in for a pool's connection: its statements answer when the test says so. */
function fakeClient() {
  const socket = new EventEmitter() as EventEmitter & { destroy(): void };
  socket.destroy = () => socket.emit("destroyed");
  const pending: Array<() => void> = [];
  let dog: Watchdog | null = null;
  const client = {
    /** Sends a statement the way src/db/connection.ts does: the watchdog told it waits. */
    query: (_sql: string) => {
      const answered = dog?.waiting();
      return new Promise<void>((resolve) => pending.push(resolve)).finally(answered);
    },
  };
  return {
    client,
    /** Puts the connection under `watchdog` (adopts its socket; its statements are told). */
    watchedBy(watchdog: Watchdog) {
      dog = watchdog;
      watchdog.adopt(socket);
    },
    answerAll: () => {
      for (const answer of pending.splice(0)) answer();
    },
  };
}

/** A server that answers every byte at once: a healthy database, over a real socket. */
let echo: Server;
let echoPort = 0;
const sockets = new Set<Socket>();
beforeAll(async () => {
  echo = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("data", (data) => socket.write(data));
  });
  await new Promise<void>((resolve) => echo.listen(0, "127.0.0.1", resolve));
  echoPort = (echo.address() as { port: number }).port;
});
afterAll(async () => {
  for (const s of sockets) s.destroy();
  await new Promise((resolve) => echo.close(resolve));
});

/** A probe over a real socket: connects, sends one byte, resolves on its echo; `onSent` runs once sent. */
function socketProbe(onSent: () => void, counter: { probes: number }) {
  return (attempt: ProbeAttempt) =>
    new Promise<void>((resolve, reject) => {
      counter.probes++;
      const socket = connect(echoPort, "127.0.0.1");
      attempt.signal.addEventListener("abort", () => socket.destroy(attempt.signal.reason as Error));
      socket.on("error", reject);
      socket.once("connect", () => {
        socket.write("?");
        attempt.sent();
        onSent();
      });
      socket.once("data", () => {
        socket.destroy();
        resolve();
      });
    });
}

describe("the watchdog does not count the event loop's lag", () => {
  let dog: Watchdog | null = null;
  afterEach(() => {
    dog?.stop();
    dog = null;
  });

  it("a loop blocked past the bound right after the probe is sent: the answer counts, the database stays up", async () => {
    const bound = 100;
    const downs: string[] = [];
    const counter = { probes: 0 };
    let answered!: () => void;
    const probeAnswered = new Promise<void>((resolve) => {
      answered = resolve;
    });
    const probe = socketProbe(() => blockLoop(bound * 5), counter);
    dog = createWatchdog({
      boundMs: bound,
      probe: (attempt) => probe(attempt).then(answered),
      onDown: (reason) => downs.push(reason),
    });
    const { client, answerAll, watchedBy } = fakeClient();
    watchedBy(dog);
    void client.query("SELECT pg_sleep(1)");
    await probeAnswered;
    // Two more bounds of ticks: nothing late declares it down either.
    await new Promise((resolve) => setTimeout(resolve, bound * 2));
    expect(downs).toEqual([]);
    expect(dog.isDown()).toBe(false);
    expect(() => dog!.check()).not.toThrow();
    expect(counter.probes).toBeGreaterThanOrEqual(1);
    answerAll();
  });

  it("a statement answered after the loop was blocked past the bound is not a statement that waited: no probe", async () => {
    const bound = 100;
    const counter = { probes: 0 };
    dog = createWatchdog({ boundMs: bound, probe: socketProbe(() => {}, counter) });
    const { client, answerAll, watchedBy } = fakeClient();
    watchedBy(dog);
    const statement = client.query("SELECT 1");
    blockLoop(bound * 5);
    // The answer arrives with the loop's next I/O, as a database's would.
    setImmediate(answerAll);
    await statement;
    await new Promise((resolve) => setTimeout(resolve, bound));
    expect(counter.probes).toBe(0);
  });

  it("a silent server is still declared down: no connection, or no answer once sent, within the bound", async () => {
    const bound = 60;
    for (const silence of ["connection", "answer"] as const) {
      const downs: string[] = [];
      let aborted = false;
      let declared!: () => void;
      const isDown = new Promise<void>((resolve) => {
        declared = resolve;
      });
      const watchdog = createWatchdog({
        boundMs: bound,
        probe: (attempt) =>
          new Promise<void>((_resolve, reject) => {
            if (silence === "answer") attempt.sent();
            attempt.signal.addEventListener("abort", () => {
              aborted = true;
              reject(attempt.signal.reason);
            });
          }),
        onDown: (reason) => {
          downs.push(reason);
          declared();
        },
      });
      const { client, answerAll, watchedBy } = fakeClient();
      watchedBy(watchdog);
      const started = performance.now();
      void client.query("SELECT 1");
      await isDown;
      const took = performance.now() - started;
      watchdog.stop();
      answerAll();
      expect(aborted, silence).toBe(true);
      expect(downs, silence).toEqual([
        expect.stringContaining(
          silence === "connection"
            ? `no connection for a probe within ${bound} ms`
            : `no answer to a probe within ${bound} ms`,
        ),
      ]);
      expect(() => watchdog.check(), silence).toThrow();
      // The statement's bound, then the probe's, and a tick or two.
      expect(took, silence).toBeGreaterThanOrEqual(bound * 2);
      expect(took, silence).toBeLessThan(bound * 10);
    }
  });

  it("the alive clock counts a lagged interval as the interval scheduled, and says it lagged", () => {
    let now = 0;
    const clock = aliveClock(() => now, 50);
    now = 50;
    expect(clock.advance()).toBe(false);
    expect(clock.now()).toBe(50);
    now = 5050; // a 5 s stall of the loop
    expect(clock.now()).toBe(100);
    expect(clock.advance()).toBe(true);
    expect(clock.now()).toBe(100);
    now = 5100;
    expect(clock.advance()).toBe(false);
    expect(clock.now()).toBe(150);
  });
});

describe.runIf(TEST_DATABASE_URL)("the watchdog on PostgreSQL with a blocked event loop", () => {
  it("a long statement while the process blocks its own loop again and again: answered, never down", async () => {
    const events: string[] = [];
    const db = openPostgres(TEST_DATABASE_URL!, {
      max: 2,
      watchdogMs: 100,
      onWatchdog: (event) => events.push(event.state),
    });
    try {
      // The pool's connection made first: the statement leaves at once.
      expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
      const slept = db.query<{ ok: number }>("SELECT 1 AS ok FROM pg_sleep(2.5)");
      // Six blocks of 300 ms (three bounds each) with one turn of the loop between them, then a
      // free loop while the statement still waits: its probe is made then, and answered.
      for (let i = 0; i < 6; i++) {
        blockLoop(300);
        await new Promise((resolve) => setImmediate(resolve));
      }
      expect((await slept).rows).toEqual([{ ok: 1 }]);
      expect((await db.query<{ one: number }>("SELECT 1 AS one")).rows).toEqual([{ one: 1 }]);
      expect(events).toEqual([]);
    } finally {
      await db.close();
    }
  });
});
