// The listening connection of a PostgreSQL handle: every LISTEN of the process on one connection
// (direct to the server: DATABASE_LISTEN_URL behind PgBouncer, whose transaction pooling would
// hand the session's LISTENs to another client), re-established after a loss, and the probe that
// waits until every listening connection of the database has caught up with the commits so far.
import { randomUUID } from "node:crypto";
import pg from "pg";

/** The longest wait between two attempts to re-establish a lost listening connection. */
const MAX_RELISTEN_DELAY_MS = 5000;

interface ChannelListener {
  onPayload: (payload: string) => void;
  onLost: () => void;
  onBack: () => void;
}

/**
 * The channel of `listenersCaughtUp`: its probes ("w:<token>") and each listening connection's
 * answer to one ("a:<token>", sent from that connection, so the notice names its backend).
 */
const CAUGHT_UP_CHANNEL = "dimensio_caught_up";
/** The application_name of every listening connection: pg_stat_activity names the ones to wait for. */
const LISTENING_APPLICATION = "dimensio listening";
/** How long `listenersCaughtUp` waits for a listening connection that does not answer. */
export const CAUGHT_UP_TIMEOUT_MS = 2000;
const QUIET_LISTENER: ChannelListener = { onPayload() {}, onLost() {}, onBack() {} };

/**
 * Every LISTEN of a pool on one connection of its own (a NOTIFY wakes each listening connection of
 * the database, so one per process, not one per channel). When that connection breaks, each
 * listener's `onLost` is called at once and the connection is re-established with backoff; once
 * listening again, `onBack` then `onPayload("")` tell each listener that notifications may have
 * been missed. (An empty payload alone does not say the connection is back: this process's own
 * committed writes are told to the outbox's listeners with one, while the connection is lost too.)
 */
export function listeningConnection(
  /** Where the listening connection comes from: the service's pool, or a direct one (listenUrl). */
  listenPool: pg.Pool,
  /** Where caughtUp's probe is sent from (any connection of the database). */
  pool: pg.Pool,
  onConnectionError: (err: Error) => void,
) {
  const channels = new Map<string, Set<ChannelListener>>();
  let client: pg.PoolClient | null = null;
  let connecting: Promise<pg.PoolClient> | null = null;
  let retry: NodeJS.Timeout | null = null;
  let closed = false;

  /**
   * Gives `payload` to the channel's listeners in this process. One listener's failure reaches
   * neither the others nor the caller: the listening connection (an uncaught throw), or a write
   * that has committed (committedNotifier).
   */
  const tell = (channel: string, payload: string) => {
    for (const l of channels.get(channel) ?? []) {
      try {
        l.onPayload(payload);
      } catch {}
    }
  };
  /** The probes of listenersCaughtUp this process waits on, by token: told each answering backend. */
  const probes = new Map<string, (backendPid: number) => void>();
  /**
   * A probe comes after every notice committed before it (PostgreSQL delivers in commit order,
   * across channels), and those have been told synchronously as they came: answered at once.
   */
  function onCaughtUpNotice(c: pg.PoolClient, msg: pg.Notification) {
    const payload = msg.payload ?? "";
    if (payload.startsWith("w:")) {
      c.query("SELECT pg_notify($1, $2)", [CAUGHT_UP_CHANNEL, `a:${payload.slice(2)}`]).catch(() => {});
    } else if (payload.startsWith("a:")) {
      probes.get(payload.slice(2))?.(msg.processId);
    }
  }
  function onNotification(this: pg.PoolClient, msg: pg.Notification) {
    if (msg.channel === CAUGHT_UP_CHANNEL) onCaughtUpNotice(this, msg);
    else tell(msg.channel, msg.payload ?? "");
  }
  const detach = (c: pg.PoolClient) => {
    c.off("notification", onNotification);
    c.off("error", onError);
  };
  function onError(err: Error) {
    onConnectionError(err);
    const c = client;
    client = null;
    if (c) {
      detach(c);
      c.release(err);
    }
    if (closed || channels.size === 0) return;
    for (const listeners of channels.values()) for (const l of listeners) l.onLost();
    reconnectLater(250);
  }
  async function connect(): Promise<pg.PoolClient> {
    const c = await listenPool.connect();
    c.on("notification", onNotification);
    c.on("error", onError);
    try {
      for (const channel of channels.keys()) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
      // Answering probes from now on; then named, so that probes wait for this connection.
      await c.query(`LISTEN ${CAUGHT_UP_CHANNEL}`);
      await c.query(`SET application_name = '${LISTENING_APPLICATION}'`);
    } catch (err) {
      detach(c);
      // Closed, not given back: it may hold some of the LISTENs already.
      c.release(true);
      throw err;
    }
    return c;
  }
  /** The listening connection, made when there is none (one attempt shared by its callers). */
  function connected(): Promise<pg.PoolClient> {
    if (client) return Promise.resolve(client);
    connecting ??= connect()
      .then((c) => {
        client = c;
        return c;
      })
      .finally(() => {
        connecting = null;
      });
    return connecting;
  }
  function reconnectLater(delay: number) {
    if (retry) return;
    retry = setTimeout(async () => {
      retry = null;
      if (closed || channels.size === 0) return;
      try {
        await connected();
      } catch {
        if (!closed) reconnectLater(Math.min(delay * 2, MAX_RELISTEN_DELAY_MS));
        return;
      }
      for (const listeners of channels.values())
        for (const l of listeners) {
          l.onBack();
          l.onPayload("");
        }
    }, delay);
    retry.unref();
  }
  /** Gives the connection back to the pool in a clean state (no channel left, or closing). */
  async function letGo() {
    const c = client;
    client = null;
    if (!c) return;
    detach(c);
    c.on("error", () => {});
    await c.query("UNLISTEN *").catch(() => {});
    await c.query("RESET application_name").catch(() => {});
    c.release();
  }

  /** Adds a listener of `channel` (LISTENing first if it is the channel's first): its unlisten. */
  async function listen(channel: string, listener: ChannelListener): Promise<() => Promise<void>> {
    const listeners = channels.get(channel) ?? new Set<ChannelListener>();
    const first = listeners.size === 0;
    channels.set(channel, listeners);
    listeners.add(listener);
    try {
      const c = await connected();
      // LISTEN twice is harmless (a connection made meanwhile has listened already).
      if (first) await c.query(`LISTEN ${pg.escapeIdentifier(channel)}`);
    } catch (err) {
      listeners.delete(listener);
      if (listeners.size === 0) channels.delete(channel);
      throw err;
    }
    let active = true;
    return async () => {
      if (!active) return;
      active = false;
      listeners.delete(listener);
      if (listeners.size > 0 || channels.get(channel) !== listeners) return;
      channels.delete(channel);
      if (channels.size === 0) {
        if (retry) clearTimeout(retry);
        retry = null;
        await connecting?.catch(() => {});
        if (channels.size === 0) await letGo();
      } else if (channel !== CAUGHT_UP_CHANNEL) {
        // (The probes' channel stays listened while the connection lives: it answers other
        // processes' probes whether or not this process waits on one.)
        await client?.query(`UNLISTEN ${pg.escapeIdentifier(channel)}`).catch(() => {});
      }
    };
  }

  return {
    tell,
    listen,
    /**
     * Sends a probe behind every notice committed so far and waits for the answer of each listening
     * connection of the database (pg_stat_activity's, by application_name), bounded by `timeoutMs`.
     */
    async caughtUp(timeoutMs: number): Promise<void> {
      const token = randomUUID();
      const answered = new Set<number>();
      let expected: number[] | null = null;
      let over = false;
      let finish = () => {};
      const finished = new Promise<void>((resolve) => {
        finish = () => {
          over = true;
          resolve();
        };
      });
      const settle = () => {
        if (expected?.every((pid) => answered.has(pid))) finish();
      };
      probes.set(token, (pid) => {
        answered.add(pid);
        settle();
      });
      const timer = setTimeout(finish, timeoutMs);
      timer.unref();
      // The whole of it within the bound: a connection slow to come counts against it too.
      const probing = (async () => {
        // This process's connection listens (and answers) before the probe is sent; with a
        // listener of its own (one shared by two waits would be unlistened by the first).
        const unlisten = await listen(CAUGHT_UP_CHANNEL, { ...QUIET_LISTENER });
        try {
          if (over) return;
          const { rows } = await pool.query<{ pids: number[] }>(
            `SELECT array(SELECT pid FROM pg_stat_activity
                           WHERE datname = current_database() AND application_name = $2) AS pids,
                    pg_notify($1, $3)`,
            [CAUGHT_UP_CHANNEL, LISTENING_APPLICATION, `w:${token}`],
          );
          expected = rows[0]?.pids ?? [];
          settle();
          await finished;
        } finally {
          await unlisten();
        }
      })();
      // No probe, or no connection to hear the answers: nothing more can be known.
      probing.catch(finish);
      await finished;
      clearTimeout(timer);
      probes.delete(token);
    },
    async close() {
      closed = true;
      if (retry) clearTimeout(retry);
      retry = null;
      channels.clear();
      await connecting?.catch(() => {});
      await letGo();
    },
  };
}
