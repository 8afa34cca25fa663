// A transaction on PostgreSQL, as two small state machines:
//
// - its lease of a connection: none → connecting → held | refused. The connection is taken from
//   the pool by the transaction's first statement (a transaction that sends nothing takes none);
//   statements given while it is on its way are queued and go out in their order once it is there.
// - its phase: idle → open (BEGIN sent, with the first statement: pipelined, not awaited) →
//   ending (COMMIT sent) → done | failed; or idle → alone (its lastStatement sent on its own, a
//   transaction of its own: no BEGIN, no COMMIT) → done. A lastStatement the server refused
//   while alone changed nothing: the phase is idle again (create groups fall back to each create).
import type pg from "pg";
import type { QueryOptions, QueryResult, TransactionOptions } from "../types.ts";
import type { ServiceClient } from "./connection.ts";
import { answeredByServer } from "./errors.ts";
import type { StatementObserver, TxQueryable } from "./handle.ts";
import { addNoticeItems, type NoticeItems, noticeItemsOf, noticePayload } from "./notice.ts";
import type { CommittedNotifier } from "./notify.ts";
import { deferredWork, hooked, pgQueryable } from "./statements.ts";

export interface TransactionContext {
  pool: pg.Pool;
  /** Statements may be named (prepared once per connection): not behind PgBouncer's transaction pooling. */
  named: boolean;
  notifier: CommittedNotifier;
  onStatement?: StatementObserver | undefined;
  transactionTimeoutMs: number;
  /** Told once when the connection breaks while the transaction holds it. */
  onConnectionError: (err: Error) => void;
}

/** A transaction's connection and its statements, once the pool gave it. */
interface Held {
  client: ServiceClient & pg.PoolClient;
  raw: TxQueryable;
}

type LeaseState =
  | { name: "none" }
  | {
      name: "connecting";
      taking: Promise<Held>;
      queued: Array<{ send(h: Held): void; fail(err: unknown): void }>;
    }
  | { name: "held"; taking: Promise<Held>; held: Held }
  | { name: "refused"; err: unknown };

/** The transaction's connection: taken at its first statement, given back at its end. */
class Lease {
  private state: LeaseState = { name: "none" };
  /** Why the connection broke while held: it is closed, not reused. */
  broken: Error | null = null;
  private readonly onBroken = (err: Error) => {
    if (!this.broken) this.ctx.onConnectionError(err);
    this.broken ??= err;
  };

  constructor(private readonly ctx: TransactionContext) {}

  /** The connection: asked of the pool the first time (one attempt, shared). */
  connection(): Promise<Held> {
    const s = this.state;
    if (s.name === "held" || s.name === "connecting") return s.taking;
    if (s.name === "refused") return Promise.reject(s.err);
    const queued: Array<{ send(h: Held): void; fail(err: unknown): void }> = [];
    const taking = this.ctx.pool.connect().then(
      (c) => {
        const client = c as ServiceClient & pg.PoolClient;
        const held: Held = { client, raw: pgQueryable(client, this.ctx.named) };
        client.on("error", this.onBroken);
        client.inTransaction = true;
        this.state = { name: "held", taking, held };
        for (const q of queued) q.send(held);
        return held;
      },
      (err: unknown) => {
        this.state = { name: "refused", err };
        for (const q of queued) q.fail(err);
        throw err;
      },
    );
    this.state = { name: "connecting", taking, queued };
    return taking;
  }

  /** `send` on the connection: now when it is there, else once it is, in the order given. */
  on<R>(send: (h: Held) => Promise<R>): Promise<R> {
    const s = this.state;
    if (s.name === "held") return send(s.held);
    if (s.name === "refused") return Promise.reject(s.err);
    return new Promise<R>((resolve, reject) => {
      const entry = {
        send: (h: Held) => {
          try {
            send(h).then(resolve, reject);
          } catch (err) {
            reject(err);
          }
        },
        fail: reject,
      };
      if (s.name === "connecting") s.queued.push(entry);
      else {
        this.connection().catch(() => {}); // the failure reaches `fail`
        (this.state as Extract<LeaseState, { name: "connecting" }>).queued.push(entry);
      }
    });
  }

  /** Gives the connection (even one still on its way) back to the pool; closed if it broke. */
  async release(): Promise<void> {
    const s = this.state;
    if (s.name !== "connecting" && s.name !== "held") return;
    const held = await s.taking.catch(() => null);
    if (!held) return;
    held.client.inTransaction = false;
    held.client.off("error", this.onBroken);
    held.client.release(this.broken ?? undefined);
  }
}

type Phase =
  | { name: "idle" }
  | { name: "alone"; committed: boolean }
  | { name: "open" }
  | { name: "ending"; commit: Promise<unknown> }
  | { name: "done" }
  | { name: "failed" };

const ENDED = "The transaction has ended: nothing may follow its last statement.";

export async function runTransaction<T>(
  ctx: TransactionContext,
  fn: (tx: TxQueryable) => Promise<T>,
  txOpts?: TransactionOptions,
): Promise<T> {
  const { notifier } = ctx;
  const tell: StatementObserver = ctx.onStatement ?? (() => {});
  const lease = new Lease(ctx);
  const deferred = deferredWork();
  let phase: Phase = { name: "idle" };
  /** BEGIN's answer, until the first statement behind it awaited it. */
  let begun: Promise<unknown> | null = null;
  /** What the transaction changed, per channel to wake once it commits. */
  const notices = new Map<string, NoticeItems>();
  const notice = (channel: string, item: string | undefined) =>
    void notices.set(channel, addNoticeItems(notices.get(channel) ?? null, noticeItemsOf(item))!);
  /** The NOTIFYs the transaction carries (channel, what each names). */
  const claimed: Array<[string, NoticeItems]> = [];
  /** The payload of the NOTIFY of `channel` this commit carries, or null when it carries none. */
  const claimNotice = (channel: string, items: NoticeItems): string | null => {
    const named = notifier.claim(channel, items);
    if (named === null) return null;
    claimed.push([channel, named]);
    return noticePayload(named);
  };
  const tellCommitted = () => {
    for (const [channel, items] of notices) notifier.committed(channel, items);
  };
  // Statements sent and not answered yet: one sent meanwhile shares their round trip.
  let inFlight = 0;
  const track = <R>(sent: Promise<R>): Promise<R> => {
    inFlight++;
    const done = () => inFlight--;
    sent.then(done, done);
    return sent;
  };
  /** Sends the NOTIFY the commit carries (when it is to carry one) and COMMIT: once. */
  const commit = (): Promise<unknown> => {
    if (phase.name === "ending") return phase.commit;
    // Other processes' listeners: a NOTIFY in the transaction itself, pipelined with COMMIT.
    for (const [channel, items] of notices) {
      const payload = claimNotice(channel, items);
      if (payload === null) continue;
      tell("SELECT pg_notify($1, $2)", { pipelined: inFlight > 0 });
      deferred.defer(
        track(lease.on(({ client }) => client.query("SELECT pg_notify($1, $2)", [channel, payload]))),
      );
    }
    tell("COMMIT", { pipelined: inFlight > 0 });
    const committing = track(lease.on(({ client }) => client.query("COMMIT")));
    committing.catch(() => {});
    phase = { name: "ending", commit: committing };
    return committing;
  };
  const open = () => {
    if (phase.name === "open") return;
    if (phase.name !== "idle") throw new Error(ENDED);
    phase = { name: "open" };
    tell("BEGIN", { pipelined: false });
    const b = track(
      lease.on(({ client }) => {
        client.beforeBegin(txOpts?.plan ?? "custom");
        return client.query("BEGIN");
      }),
    );
    b.catch(() => {});
    begun = b;
  };
  /** A statement's answer, BEGIN's failure first when it is the first statement behind it. */
  const afterBegin = async <R>(sent: Promise<R>): Promise<R> => {
    if (begun) {
      const b = begun;
      begun = null;
      sent.catch(() => {});
      await b;
    }
    return sent;
  };
  const inner: TxQueryable = {
    query: (text, params, o) => afterBegin(track(lease.on(({ raw }) => raw.query(text, params, o)))),
    exec: (sql) => afterBegin(track(lease.on(({ raw }) => raw.exec(sql)))),
    defer: deferred.defer,
    notifyAfterCommit: notice,
  };
  async function lastStatement<R>(
    wake: { channel: string; item?: string },
    text: (payload: string | null) => string,
    params: readonly unknown[],
    o?: QueryOptions,
  ): Promise<QueryResult<R>> {
    if (phase.name === "open") {
      notice(wake.channel, wake.item);
      const sent = tx.query<R>(text(null), params, o);
      // Nothing follows it: COMMIT goes right behind it, sharing its round trip. Should it
      // fail, the transaction is aborted and that COMMIT rolls it back.
      commit();
      return sent;
    }
    if (phase.name !== "idle") throw new Error(ENDED);
    phase = { name: "alone", committed: false };
    // Other processes' relays: a NOTIFY in the statement itself, folded as after a COMMIT.
    const payload = claimNotice(wake.channel, noticeItemsOf(wake.item));
    const sql = text(payload === null ? null : `$${params.length + 1}`);
    tell(sql, { pipelined: false });
    // Nothing to send with it: out at once, not corked to the end of the turn.
    const { client, raw } = await lease.connection();
    client.inTransaction = false;
    let res: QueryResult<R>;
    try {
      res = await raw.query<R>(sql, payload === null ? params : [...params, payload], o);
    } catch (err) {
      // The server refused the statement (an error with its SQLSTATE): a statement that is its
      // own transaction changed nothing, so the transaction is as it was before it and may send
      // another (a group of creates falls back to each create on its own,
      // src/resolvers/write/create-groups.ts). The NOTIFY it carried goes on its own.
      if (!lease.broken && answeredByServer(err)) {
        phase = { name: "idle" };
        if (payload !== null) {
          const [channel, named] = claimed.pop()!;
          notifier.unclaim(channel, named);
        }
      }
      throw err;
    }
    phase = { name: "alone", committed: true };
    notice(wake.channel, wake.item);
    return res;
  }
  /**
   * The statements fn is given: each with the deadline, the lazy BEGIN and the observer (the
   * last two not for lastStatement, which sends BEGIN or not, and tells its text, itself).
   */
  const tx: TxQueryable = hooked(
    { ...inner, lastStatement },
    {
      deadlineMs: ctx.transactionTimeoutMs,
      open,
      onStatement: ctx.onStatement,
      pipelined: () => inFlight > 0,
    },
  );
  try {
    const result = await fn(tx);
    const p = phase as Phase;
    if (p.name === "idle" || p.name === "alone") {
      await deferred.all();
      tellCommitted();
      phase = { name: "done" };
      return result;
    }
    if (begun) await begun;
    const committed = commit();
    // A deferred statement that failed aborted the transaction: COMMIT then rolls it back.
    await deferred.all();
    await committed;
    tellCommitted();
    phase = { name: "done" };
    return result;
  } catch (err) {
    const p = phase as Phase;
    if (!lease.broken && p.name === "open") {
      tell("ROLLBACK", { pipelined: false });
      await lease.on(({ client }) => client.query("ROLLBACK")).catch(() => {});
    }
    // A COMMIT sent behind a last statement that failed rolls back: answered before release.
    if (p.name === "ending") await p.commit.catch(() => {});
    const aloneCommitted = p.name === "alone" && p.committed;
    // What a rolled-back transaction was to carry goes on its own (a statement sent alone that
    // committed carried it); one sent alone that committed stays committed: this process is told.
    if (aloneCommitted) tellCommitted();
    else for (const [channel, named] of claimed) notifier.unclaim(channel, named);
    phase = { name: "failed" };
    throw err;
  } finally {
    await lease.release();
  }
}
