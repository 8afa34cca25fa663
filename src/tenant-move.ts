// Moves a tenant's rows to another database (decisions.md §18; `npm run tenant:move`), losing no
// acknowledged write and no event:
//
// 1. Fence: TB_TENANT.MOVING_SINCE is set; every process learns it through NOTIFY (migration
//    0018) and refuses the tenant's writes with 503 TENANT_MOVING and Retry-After; its reads go
//    on. The move waits until every listening process has been told, then until the transactions
//    of the source database that began before that moment have ended (a write already under way).
// 2. Copy: the tenant's rows of every dimension table, record history, search rows, event
//    counts, sequences, import ledger, webhooks (new ids there) with their deliveries and log,
//    read in one snapshot of the source and written in one transaction of the target, a page of
//    rows at a time (memory holds one page: MoveOptions.pageRows); whatever an earlier,
//    interrupted move left there of the tenant is removed first. Its outbox rows not yet
//    published move with the relays' turn held on the source (no relay publishes them
//    meanwhile): deleted there and inserted in the target in OUTBOX_ID order, where the target's
//    relay publishes them; the target's OUTBOX_IDs are moved past the source's so that no id of
//    the tenant's past comes again.
// 3. Check: every copied table's rows of the tenant are compared (count and the sum of their
//    JSON's 64-bit hashes, key order normalised, in constant memory) between source and target; a
//    difference (a write that slipped past the fence) is copied again, then checked again.
// 4. Switch: TB_TENANT.DATABASE names the target, every process is told (reads go there), the
//    fence is lifted, and the source's rows of the tenant are deleted once the reads that began
//    there have ended.
import type { DatabaseHandle } from "./db/database.ts";
import { ident } from "./db/sql.ts";
import { OUTBOX_CHANNEL } from "./events/outbox.ts";
import { RELAY_TURN_LOCK } from "./events/relay.ts";
import type { Services } from "./services.ts";
import type { Queryable } from "./types.ts";

/** A move that cannot be made (unknown tenant or profile, already there); nothing was changed. */
export class TenantMoveError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "TenantMoveError";
  }
}

export interface MoveOptions {
  /** Told of each step (the CLI prints them); the move waits for what it returns. */
  onStep?: (step: string) => void | Promise<void>;
  /** After every process was told of a change, how long the move waits for it to be applied. */
  settleMs?: number;
  /** The longest wait for the source's earlier transactions to end. */
  drainTimeoutMs?: number;
  /** Rows read from the source and written to the target at a time (memory is bounded by it). */
  pageRows?: number;
}

/** The page of rows a copy holds at a time, unless MoveOptions.pageRows says otherwise. */
const PAGE_ROWS = 1000;

export interface MoveResult {
  tenant: string;
  from: string | null;
  to: string | null;
  /** Rows copied per table. */
  copied: Record<string, number>;
  /**
   * Rows of the tenant the target held before the copy, per table (a leftover of an earlier move,
   * or another deployment's: a profile URL pointing at the wrong database), replaced by the copy.
   */
  replaced: Record<string, number>;
  /** Unpublished outbox rows moved. */
  eventsMoved: number;
}

/** Fixed tables holding a tenant's rows, with the column naming the tenant. */
const TENANT_TABLES: ReadonlyArray<{ table: string; tenant: string }> = [
  { table: "TB_HISTORY", tenant: "TENANT_ID" },
  { table: "TB_SEARCH", tenant: "TENANT_ID" },
  { table: "TB_EVENT_STATS", tenant: "TENANT_ID" },
  { table: "TB_SEQUENCE", tenant: "TENANT_ID" },
  { table: "TB_IMPORT_LEDGER", tenant: "TENANT_ID" },
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `main` or a configured profile, as TB_TENANT.DATABASE stores it (null: main). */
export function targetOf(services: Services, name: string): string | null {
  if (name.toLowerCase() === "main") return null;
  const upper = name.toUpperCase();
  if (!services.profiles.names.includes(upper))
    throw new TenantMoveError(
      `${name} is not a configured database profile (set DATABASE_URL_${upper}), nor main; configured: ${[
        "main",
        ...services.profiles.names,
      ].join(", ")}.`,
    );
  return upper;
}

export async function moveTenant(
  services: Services,
  tenantId: string,
  targetName: string,
  opts: MoveOptions = {},
): Promise<MoveResult> {
  const step = opts.onStep ?? (() => {});
  const settleMs = opts.settleMs ?? 250;
  const main = services.db;
  const to = targetOf(services, targetName);
  const { rows } = await main.query<{ DATABASE: string | null; MOVING: boolean }>(
    `SELECT upper("DATABASE") AS "DATABASE", "MOVING_SINCE" IS NOT NULL AS "MOVING"
       FROM "TB_TENANT" WHERE "TENANT_ID" = $1`,
    [tenantId],
  );
  if (rows.length === 0) throw new TenantMoveError(`Tenant ${tenantId} does not exist.`);
  const from = rows[0]!.DATABASE;
  if (from === to && rows[0]!.MOVING) {
    // A move interrupted after its switch: the tenant is served from `to`; its writes resume.
    await step(
      `lifting the fence of an interrupted move of ${tenantId} (the old database may keep its rows, unread)`,
    );
    await main.query(`UPDATE "TB_TENANT" SET "MOVING_SINCE" = NULL WHERE "TENANT_ID" = $1`, [tenantId]);
    await services.profiles.refresh();
    return { tenant: tenantId, from, to, copied: {}, replaced: {}, eventsMoved: 0 };
  }
  if (from === to) throw new TenantMoveError(`Tenant ${tenantId} is in ${to ?? "main"} already.`);
  for (const name of [from, to])
    if (name !== null && !(await services.profiles.prepare(name)))
      throw new TenantMoveError(`The database of profile ${name} is not reachable; nothing was changed.`);
  const source = services.profiles.handle(from);
  const target = services.profiles.handle(to);

  /** Every process has applied what TB_TENANT says now; then the source's earlier work ended. */
  const told = async () => {
    await services.profiles.refresh();
    await main.listenersCaughtUp();
    await sleep(settleMs);
    await drainEarlierTransactions(source, opts.drainTimeoutMs ?? 60_000);
  };

  await step(`fencing ${tenantId}'s writes`);
  await main.query(
    `UPDATE "TB_TENANT" SET "MOVING_SINCE" = coalesce("MOVING_SINCE", now()) WHERE "TENANT_ID" = $1`,
    [tenantId],
  );
  await told();

  const tables = dimensionTables(services);
  const copied: Record<string, number> = {};
  const replaced: Record<string, number> = {};
  await step(`copying ${tenantId}'s rows from ${from ?? "main"} to ${to ?? "main"}`);
  const pageRows = Math.max(1, opts.pageRows ?? PAGE_ROWS);
  await copyEverything(source, target, tenantId, tables, copied, pageRows, replaced);
  const eventsMoved = await moveUnpublished(source, target, tenantId);
  await step("checking the copy");
  for (let round = 0; ; round++) {
    const differing = await differences(source, target, tenantId, tables);
    if (differing.length === 0) break;
    if (round >= 3) throw new Error(`the copy differs from the source in ${differing.join(", ")}`);
    await step(`copying again: ${differing.join(", ")}`);
    await copyEverything(source, target, tenantId, tables, copied, pageRows);
  }

  await step(`switching ${tenantId} to ${to ?? "main"}`);
  await main.query(`UPDATE "TB_TENANT" SET "DATABASE" = $2 WHERE "TENANT_ID" = $1`, [tenantId, to]);
  await told();
  await main.query(`UPDATE "TB_TENANT" SET "MOVING_SINCE" = NULL WHERE "TENANT_ID" = $1`, [tenantId]);
  await services.profiles.refresh();
  // Totals counted on the target before the copy are forgotten; its relays look at the outbox.
  await target.query(`SELECT pg_notify($1, '')`, [OUTBOX_CHANNEL]);

  await step(`removing ${tenantId}'s rows from ${from ?? "main"}`);
  await source.transaction(async (tx) => {
    await deleteTenantRows(tx, tenantId, tables);
    await tx.query(`DELETE FROM "TB_ANAG_OUTBOX00" WHERE "TENANT_ID" = $1`, [tenantId]);
  });
  return { tenant: tenantId, from, to, copied, replaced, eventsMoved };
}

function dimensionTables(services: Services): string[] {
  return [...new Set([...services.metadata.current().dimensions.values()].map((d) => d.tableName))];
}

/**
 * Waits until every transaction of `db` that began before now has ended (as CREATE INDEX
 * CONCURRENTLY waits): a write that began before the fence commits or rolls back first.
 */
async function drainEarlierTransactions(db: DatabaseHandle, timeoutMs: number): Promise<void> {
  const { rows } = await db.query<{ now: Date }>(`SELECT clock_timestamp() AS now`);
  const since = rows[0]!.now;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const busy = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start < $1`,
      [since],
    );
    if (busy.rows[0]!.n === 0) return;
    if (Date.now() > deadline) throw new Error("transactions of the source database did not end in time");
    await sleep(50);
  }
}

/**
 * The rows of `from` (an SQL query answering one JSON column "row") on the source, `pageRows` at a
 * time through a cursor of `stx` (the source's transaction: one snapshot for the whole copy), each
 * page handed to `page` before the next is read: memory holds one page, whatever the tenant's size.
 */
async function eachPage(
  stx: Queryable,
  from: string,
  params: readonly unknown[],
  pageRows: number,
  page: (rows: Record<string, unknown>[]) => Promise<void>,
): Promise<number> {
  await stx.query(`DECLARE move_rows NO SCROLL CURSOR FOR ${from}`, params);
  let count = 0;
  try {
    for (;;) {
      const { rows } = await stx.query<{ row: Record<string, unknown> }>(`FETCH ${pageRows} FROM move_rows`);
      if (rows.length === 0) break;
      count += rows.length;
      await page(rows.map((r) => r.row));
      if (rows.length < pageRows) break;
    }
  } finally {
    await stx.query(`CLOSE move_rows`);
  }
  return count;
}

/** The tenant's rows of `table`, as the query eachPage reads. */
const rowsOf = (table: string, column: string) =>
  `SELECT to_jsonb(t) AS "row" FROM ${ident(table)} t WHERE ${ident(column)} = $1`;

/**
 * Inserts pages of JSON rows into `table` by column name (the target's column order, `omit` left
 * to their defaults); `finish` moves identity and serial columns past the copied values.
 */
async function tableWriter(tx: Queryable, table: string, omit: string[] = []) {
  const { rows: cols } = await tx.query<{ name: string }>(
    `SELECT a.attname AS name FROM pg_attribute a
      WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum`,
    [ident(table)],
  );
  const names = cols.map((c) => c.name).filter((n) => !omit.includes(n));
  const list = names.map(ident).join(", ");
  return {
    async insert(rows: readonly unknown[]) {
      if (rows.length === 0) return;
      await tx.query(
        `INSERT INTO ${ident(table)} (${list}) OVERRIDING SYSTEM VALUE
         SELECT ${list} FROM jsonb_populate_recordset(NULL::${ident(table)}, $1::jsonb)`,
        [JSON.stringify(rows)],
      );
    },
    async finish() {
      for (const col of names) {
        const seq = await tx.query<{ seq: string | null }>(`SELECT pg_get_serial_sequence($1, $2) AS seq`, [
          ident(table),
          col,
        ]);
        const name = seq.rows[0]?.seq;
        if (!name) continue;
        await tx.query(
          `SELECT setval($1::regclass, greatest((SELECT coalesce(max(${ident(col)}), 1) FROM ${ident(table)}),
                  (SELECT last_value FROM ${name})))`,
          [name],
        );
      }
    },
  };
}

/** Copies the rows `from` reads on the source into `table` of the target, page by page. */
async function copyTable(
  stx: Queryable,
  ttx: Queryable,
  table: string,
  from: string,
  params: readonly unknown[],
  pageRows: number,
  opts: { omit?: string[]; remap?: (row: Record<string, unknown>) => Record<string, unknown> } = {},
): Promise<number> {
  const writer = await tableWriter(ttx, table, opts.omit);
  const n = await eachPage(stx, from, params, pageRows, (rows) =>
    writer.insert(opts.remap ? rows.map(opts.remap) : rows),
  );
  if (n > 0) await writer.finish();
  return n;
}

/** Deletes the tenant's rows of `tables` and the fixed tables; answers how many per table (those > 0). */
async function deleteTenantRows(
  tx: Queryable,
  tenantId: string,
  tables: readonly string[],
): Promise<Record<string, number>> {
  const deleted: Record<string, number> = {};
  const run = async (table: string, sql: string) => {
    const n = (await tx.query(sql, [tenantId])).rowCount ?? 0;
    if (n > 0) deleted[table] = n;
  };
  for (const table of tables) await run(table, `DELETE FROM ${ident(table)} WHERE "TENANT_ID" = $1`);
  for (const { table, tenant } of TENANT_TABLES)
    await run(table, `DELETE FROM ${ident(table)} WHERE ${ident(tenant)} = $1`);
  const hooks = `SELECT "WEBHOOK_ID" FROM "TB_WEBHOOK" WHERE "SOURCE" = $1`;
  await run("TB_WEBHOOK_DELIVERY", `DELETE FROM "TB_WEBHOOK_DELIVERY" WHERE "WEBHOOK_ID" IN (${hooks})`);
  await run("TB_WEBHOOK_LOG", `DELETE FROM "TB_WEBHOOK_LOG" WHERE "WEBHOOK_ID" IN (${hooks})`);
  await run("TB_WEBHOOK", `DELETE FROM "TB_WEBHOOK" WHERE "SOURCE" = $1`);
  return deleted;
}

/**
 * The tenant's rows (all but the outbox) into the target, replacing what it had of the tenant: read
 * in one snapshot of the source (a repeatable-read transaction) and written in one transaction of
 * the target, `pageRows` rows at a time.
 */
async function copyEverything(
  source: DatabaseHandle,
  target: DatabaseHandle,
  tenantId: string,
  tables: readonly string[],
  copied: Record<string, number>,
  pageRows: number,
  /** The first copy's: what the target held of the tenant before it (a later round's own rows are not). */
  replaced?: Record<string, number>,
): Promise<void> {
  await source.transaction(async (stx) => {
    await stx.query(`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`);
    await target.transaction(async (tx) => {
      const deleted = await deleteTenantRows(tx, tenantId, tables);
      if (replaced) Object.assign(replaced, deleted);
      for (const table of tables)
        copied[table] = await copyTable(stx, tx, table, rowsOf(table, "TENANT_ID"), [tenantId], pageRows);
      for (const { table, tenant } of TENANT_TABLES)
        copied[table] = await copyTable(stx, tx, table, rowsOf(table, tenant), [tenantId], pageRows);
      // Webhooks get the target's ids (a tenant has few); their deliveries and log follow them.
      const hooks = (
        await stx.query<{ row: Record<string, unknown> }>(rowsOf("TB_WEBHOOK", "SOURCE"), [tenantId])
      ).rows.map((r) => r.row);
      const newIds = new Map<unknown, number>();
      for (const hook of hooks) {
        const { rows } = await tx.query<{ id: number }>(
          `INSERT INTO "TB_WEBHOOK" SELECT (jsonb_populate_record(NULL::"TB_WEBHOOK",
             $1::jsonb || jsonb_build_object('WEBHOOK_ID', nextval(pg_get_serial_sequence('"TB_WEBHOOK"', 'WEBHOOK_ID'))))).*
           RETURNING "WEBHOOK_ID" AS id`,
          [JSON.stringify(hook)],
        );
        newIds.set(hook.WEBHOOK_ID, rows[0]!.id);
      }
      const ids = hooks.map((h) => h.WEBHOOK_ID);
      const remap = (r: Record<string, unknown>) => ({ ...r, WEBHOOK_ID: newIds.get(r.WEBHOOK_ID) });
      copied.TB_WEBHOOK = hooks.length;
      // A webhook's deliveries and log: new ids of their own, the webhook's new id.
      for (const [table, id] of [
        ["TB_WEBHOOK_DELIVERY", "DELIVERY_ID"],
        ["TB_WEBHOOK_LOG", "LOG_ID"],
      ] as const) {
        const of = `SELECT to_jsonb(r) AS "row" FROM ${ident(table)} r WHERE "WEBHOOK_ID" = ANY($1::int[])`;
        copied[table] = await copyTable(stx, tx, table, of, [ids], pageRows, { omit: [id], remap });
      }
    });
  });
}

/**
 * The tenant's unpublished outbox rows, moved with the relays' turn held on the source (none of
 * them is published there meanwhile): inserted into the target (new OUTBOX_IDs past every id of
 * the source, in the same order), then deleted from the source. Resolves to how many moved.
 */
async function moveUnpublished(
  source: DatabaseHandle,
  target: DatabaseHandle,
  tenantId: string,
): Promise<number> {
  return source.transaction(async (stx) => {
    await stx.query(`SELECT pg_advisory_xact_lock($1)`, [RELAY_TURN_LOCK]);
    const { rows } = await stx.query<{ row: Record<string, unknown> }>(
      `SELECT to_jsonb(o) AS "row" FROM "TB_ANAG_OUTBOX00" o
        WHERE "TENANT_ID" = $1 AND "PUBLISHED_AT" IS NULL ORDER BY "OUTBOX_ID"`,
      [tenantId],
    );
    const last = await stx.query<{ last: string }>(
      `SELECT last_value::text AS "last" FROM "TB_ANAG_OUTBOX00_OUTBOX_ID_seq"`,
    );
    await target.transaction(async (ttx) => {
      await ttx.query(
        `SELECT setval('"TB_ANAG_OUTBOX00_OUTBOX_ID_seq"',
                greatest($1::bigint, (SELECT last_value FROM "TB_ANAG_OUTBOX00_OUTBOX_ID_seq")))`,
        [last.rows[0]!.last],
      );
      for (const r of rows) {
        await ttx.query(
          `INSERT INTO "TB_ANAG_OUTBOX00" ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT", "PREVIOUS")
           SELECT "EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT", "PREVIOUS"
             FROM jsonb_populate_record(NULL::"TB_ANAG_OUTBOX00", $1::jsonb)`,
          [JSON.stringify(r.row)],
        );
      }
    });
    await stx.query(`DELETE FROM "TB_ANAG_OUTBOX00" WHERE "TENANT_ID" = $1 AND "PUBLISHED_AT" IS NULL`, [
      tenantId,
    ]);
    return rows.length;
  });
}

/** Tables whose rows of the tenant differ between source and target (count and content). */
async function differences(
  source: DatabaseHandle,
  target: DatabaseHandle,
  tenantId: string,
  tables: readonly string[],
): Promise<string[]> {
  const digest = async (db: Queryable, table: string, column: string) => {
    // Order-free and in constant memory: the sum of every row's 64-bit hash of its JSON (key order
    // normalised by jsonb), beside the count.
    const { rows } = await db.query<{ n: string; h: string | null }>(
      `SELECT count(*)::text AS n, sum(hashtextextended(to_jsonb(t)::text, 0)::numeric)::text AS h
         FROM ${ident(table)} t WHERE ${ident(column)} = $1`,
      [tenantId],
    );
    return `${rows[0]!.n}:${rows[0]!.h ?? ""}`;
  };
  const out: string[] = [];
  const all = [...tables.map((table) => ({ table, tenant: "TENANT_ID" })), ...TENANT_TABLES];
  for (const { table, tenant } of all)
    if ((await digest(source, table, tenant)) !== (await digest(target, table, tenant))) out.push(table);
  return out;
}
