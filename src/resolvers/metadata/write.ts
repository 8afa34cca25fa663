// Metadata writes (POST/PUT/PATCH/DELETE on DIM, VAR, COST, OBJECT, MENU, SORT, DOCUMENT; level 4):
// the change is laid over the stored rows and validated like a fixture, then, in one transaction,
// written, the affected table synced, the metadata version bumped and one outbox row written per
// changed row. The registry reloads before the response, so the next request sees the change.
import { authorize } from "../../auth/authorize.ts";
import { type DeferredIndexBuild, type IndexBuild, indexBuildSql, syncTables } from "../../ddl/sync.ts";
import { inEveryProfile, requireEveryProfile } from "./every-database.ts";
import type { DatabaseHandle } from "../../db/database.ts";
import { ident } from "../../db/sql.ts";
import { ConflictError, MetadataError, ValidationError } from "../../errors.ts";
import { insertOutboxEvent } from "../../events/outbox.ts";
import { buildModel } from "../../metadata/build.ts";
import {
  bumpMetadataVersion,
  lockMetadataWrites,
  readMetadataRows,
  upsertMetadataRows,
} from "../../metadata/store.ts";
import { validateMetadata } from "../../metadata/validate.ts";
import type { Services } from "../../services.ts";
import type {
  MetadataChange,
  MetadataRows,
  MetadataWarning,
  MetadataWriteResult,
  Queryable,
  RequestContext,
  WriteAction,
} from "../../types.ts";
import { type AppliedChange, applyChange } from "./apply.ts";
import { type MetadataWriteRequest, parseMetadataRequest, type Row } from "./input.ts";
import { keyOf, type MetadataTable } from "../../metadata/tables.ts";

/** `profiles`: the database profiles whose tables follow the metadata too (decisions.md §18). */
export type MetadataWriteDeps = Pick<Services, "db" | "metadata" | "config"> &
  Partial<Pick<Services, "profiles">>;

async function deleteRow(tx: Queryable, t: MetadataTable, row: Row): Promise<void> {
  await tx.query(
    `DELETE FROM ${ident(t.table)} WHERE ${t.key.map((k, i) => `${ident(k)} = $${i + 1}`).join(" AND ")}`,
    t.key.map((k) => row[k]),
  );
}

async function readRow(tx: Queryable, t: MetadataTable, key: Row): Promise<Row> {
  const res = await tx.query<Row>(
    `SELECT ${t.columns.map(ident).join(", ")} FROM ${ident(t.table)} WHERE ${t.key
      .map((k, i) => `${ident(k)} = $${i + 1}`)
      .join(" AND ")}`,
    t.key.map((k) => key[k]),
  );
  return res.rows[0] ?? key;
}

const KIND = { created: "Created", updated: "Updated", deleted: "Deleted" } as const;

async function metadataEvent(
  tx: Queryable,
  ctx: RequestContext,
  t: MetadataTable,
  action: WriteAction,
  row: Row,
): Promise<MetadataChange> {
  const key = keyOf(t, row);
  const eventId = await insertOutboxEvent(tx, {
    dim: t.code,
    kind: KIND[action],
    recordId: key,
    tenantId: ctx.principal.tenantId,
    payload: row,
    createdAt: ctx.now(),
  });
  return { code: t.code, action, key, row, eventId };
}

function mapDataError(err: unknown): never {
  const code = (err as { code?: string })?.code;
  if (code?.startsWith("22")) {
    throw new ValidationError("INVALID_FIELD_VALUE", "A value does not fit its metadata column.");
  }
  if (code === "42P07" || code === "42710") {
    // A relation created concurrently by something other than a metadata write (those are serialised).
    throw new ConflictError(
      "UNSAFE_SCHEMA_CHANGE",
      "A table, index or constraint with a name this change needs exists already; nothing was applied.",
    );
  }
  throw err;
}

/**
 * A menu node granted to users cannot go. The answer names the caller's tenant's users only (up to
 * 20) and counts them all: user ids of other tenants are not the caller's to see.
 */
async function refuseMenuInUse(tx: Queryable, ctx: RequestContext, menu: Row): Promise<void> {
  const count = await tx.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM "TB_USER_GRANT" WHERE "COD_MENU" = $1`,
    [menu.COD_MENU],
  );
  const total = Number(count.rows[0]?.n ?? 0);
  if (!total) return;
  const own = await tx.query<{ USER_ID: string }>(
    `SELECT g."USER_ID" FROM "TB_USER_GRANT" g JOIN "TB_USER" u ON u."USER_ID" = g."USER_ID"
      WHERE g."COD_MENU" = $1 AND u."TENANT_ID" = $2 ORDER BY g."USER_ID" LIMIT 20`,
    [menu.COD_MENU, ctx.principal.tenantId],
  );
  throw new ConflictError("METADATA_IN_USE", `Menu node ${String(menu.COD_MENU)} is granted to users.`, {
    details: { users: own.rows.map((r) => r.USER_ID), user_count: total },
  });
}

/** Tables whose rows shape dimension tables: a change to one of them may alter those tables. */
const SHAPING_TABLES = new Set(["TB_DIM", "TB_VAR", "TB_OBJECT"]);

/** Codes of every dimension whose TB_DIM, TB_VAR or TB_OBJECT rows the change touches. */
function shapedDimensions(t: MetadataTable, change: AppliedChange): Set<string> {
  const touched: Array<[MetadataTable, Row | null]> = [
    [t, change.existing],
    [t, change.written],
    ...change.removed,
    ...change.added,
  ];
  const codes = new Set<string>();
  for (const [table, row] of touched) {
    if (row && SHAPING_TABLES.has(table.table) && typeof row.COD_DIM === "string") codes.add(row.COD_DIM);
  }
  return codes;
}

export async function writeMetadata(
  deps: MetadataWriteDeps,
  ctx: RequestContext,
  req: MetadataWriteRequest,
): Promise<MetadataWriteResult> {
  authorize(ctx, deps.metadata.current(), null, "metadata");
  const input = parseMetadataRequest(req);
  const t = input.table;
  let result: MetadataWriteResult;
  // On PostgreSQL new indexes of existing tables are built after the commit, CONCURRENTLY.
  const deferIndexes = deps.db.kind === "postgres";
  let deferred: DeferredIndexBuild[] = [];
  const profileDeferred: Array<{ database: string; db: DatabaseHandle; builds: DeferredIndexBuild[] }> = [];
  try {
    // Every profile's tables follow, or nothing is written (every-database.ts).
    if (deps.profiles) await requireEveryProfile(deps.profiles);
    result = await inEveryProfile(deps.profiles, (profileTxs) =>
      deps.db.transaction(async (tx) => {
        await lockMetadataWrites(tx);
        const rows = await readMetadataRows(tx);
        const previous = buildModel(rows, 0).dimensions;
        const change = applyChange(rows, input);
        if (input.op === "delete" && t.code === "MENU") await refuseMenuInUse(tx, ctx, change.existing!);
        const problems = validateMetadata(rows);
        if (problems.length) {
          throw new MetadataError(
            "The change would leave the metadata invalid; nothing was written.",
            problems,
          );
        }

        for (const [rt, r] of change.removed) await deleteRow(tx, rt, r);
        if (change.written) await upsertMetadataRows(tx, { [t.table]: [change.written] });
        else await deleteRow(tx, t, change.existing!);
        for (const [rt, r] of change.added)
          await upsertMetadataRows(tx, { [rt.table]: [r] } as Partial<MetadataRows>);
        const model = buildModel(rows, 0);
        const dims = [...shapedDimensions(t, change)].flatMap((c) => model.dimensions.get(c) ?? []);
        if (dims.length) {
          deferred = (await syncTables(tx, dims, previous, { deferIndexes })).deferred ?? [];
          for (const p of profileTxs) {
            const builds = (await syncTables(p.tx, dims, previous, { deferIndexes })).deferred ?? [];
            profileDeferred.push({ database: p.name, db: p.db, builds });
          }
        }
        const version = await bumpMetadataVersion(tx);

        const main = change.written
          ? await metadataEvent(
              tx,
              ctx,
              t,
              input.op === "create" ? "created" : "updated",
              await readRow(tx, t, change.written),
            )
          : await metadataEvent(tx, ctx, t, "deleted", change.existing!);
        const related: MetadataChange[] = [];
        for (const [rt, r] of change.removed) related.push(await metadataEvent(tx, ctx, rt, "deleted", r));
        for (const [rt, r] of change.added) {
          related.push(await metadataEvent(tx, ctx, rt, "created", await readRow(tx, rt, r)));
        }
        return { ...main, version, related };
      }),
    );
  } catch (err) {
    mapDataError(err);
  }
  await deps.metadata.refresh(true);
  const warning = await runDeferredBuilds(
    [{ database: null, db: deps.db, builds: deferred }, ...profileDeferred],
    deps.config.indexBuildTimeoutMs,
  );
  return warning ? { ...result, warnings: [warning] } : result;
}

/**
 * How long the drop of a cancelled build's invalid index may take at most: past the change's
 * deadline, it is cleaning up (an index left anyway is dropped and built again by the next sync).
 */
const CLEANUP_DROP_MS = 10_000;

/**
 * The index builds a committed change left for after its commit, database by database, all of them
 * within `timeoutMs` (INDEX_BUILD_TIMEOUT_MS bounds the change's index work, not each build: a
 * change with several builds, or with database profiles that each build their own, would otherwise
 * take several times as long, past what the gateway waits for it). The first build cancelled
 * past the deadline stops them: the change stands, and the answer carries a warning naming what was
 * not done instead of an error. Any other failure is the request's error, as before.
 */
async function runDeferredBuilds(
  databases: ReadonlyArray<{ database: string | null; db: DatabaseHandle; builds: DeferredIndexBuild[] }>,
  timeoutMs: number,
): Promise<MetadataWarning | null> {
  const all = databases.flatMap((d) => d.builds.map((build) => ({ ...d, build })));
  const deadline = timeoutMs > 0 ? Date.now() + timeoutMs : null;
  // What is left of the deadline (at least 1 ms: 0 would mean no bound at all); 0: none.
  const left = () => (deadline === null ? 0 : Math.max(1, deadline - Date.now()));
  for (const [i, { database, db, build }] of all.entries()) {
    const outcome = await buildIndexConcurrently(db, build, left(), deadline === null ? 0 : CLEANUP_DROP_MS);
    if (outcome === "built") continue;
    const notRun = all.slice(i + 1).map((b) => ({
      dimension: b.build.dim,
      index: b.build.name,
      action: b.build.kind === "create" ? "build" : "drop",
      ...(b.database === null ? {} : { database: b.database }),
    }));
    return indexBuildCancelled(build, { timeoutMs, dropped: outcome === "dropped", database, notRun });
  }
  return null;
}

/**
 * CREATE INDEX CONCURRENTLY outside any transaction, on a connection of its own for at most
 * `timeoutMs` (what is left of INDEX_BUILD_TIMEOUT_MS: a large table's build outlasts a request's
 * statement timeout). A failed build leaves an invalid index behind: it is dropped (within
 * `cleanupMs`), so that the next sync of the table need not (one left anyway is dropped and built
 * again by the next sync). A build cancelled past its bound (SQLSTATE 57014) answers whether its
 * invalid index was dropped; any other failure is thrown.
 */
async function buildIndexConcurrently(
  db: DatabaseHandle,
  build: IndexBuild,
  timeoutMs: number,
  cleanupMs: number,
): Promise<"built" | "dropped" | "left"> {
  try {
    await db.maintenance(indexBuildSql(build, { concurrently: true }), timeoutMs);
    return "built";
  } catch (err) {
    let dropped = false;
    if (build.kind === "create") {
      dropped = await db
        .maintenance(indexBuildSql({ kind: "drop", name: build.name }, { concurrently: true }), cleanupMs)
        .then(
          () => true,
          () => false,
        );
    }
    if ((err as { code?: unknown } | null)?.code !== "57014") throw err;
    return dropped ? "dropped" : "left";
  }
}

/** The warning of a build (or drop) cancelled past INDEX_BUILD_TIMEOUT_MS: what stands, what waits. */
function indexBuildCancelled(
  build: DeferredIndexBuild,
  opts: { timeoutMs: number; dropped: boolean; database: string | null; notRun: object[] },
): MetadataWarning {
  const where = opts.database === null ? "" : ` in the database of profile ${opts.database}`;
  const cancelled = `ran past INDEX_BUILD_TIMEOUT_MS (${opts.timeoutMs} ms, for the change's index work) and was cancelled`;
  const next = `The next change to ${build.dim}'s DIM, VAR or OBJECT metadata`;
  const index = `index ${build.name} of ${build.dim}${where}`;
  const what =
    build.kind === "drop"
      ? `${index} was not dropped: it ${cancelled}. ${next} drops it`
      : opts.dropped
        ? `${index} was not built: it ${cancelled}, and its invalid index was dropped. ${next} builds it`
        : `${index} was not built: it ${cancelled}, and its invalid index could not be dropped. ${next} drops and builds it`;
  const rest = opts.notRun.length
    ? "; the change's later index work (details.not_run) was not started and waits likewise"
    : "";
  return {
    code: "INDEX_BUILD_TIMEOUT",
    message: `The change was saved, but ${what}${rest}; raise INDEX_BUILD_TIMEOUT_MS for a large table.`,
    details: {
      dimension: build.dim,
      index: build.name,
      timeout_ms: opts.timeoutMs,
      ...(build.kind === "create" ? { invalid_index_dropped: opts.dropped } : {}),
      ...(opts.database === null ? {} : { database: opts.database }),
      ...(opts.notRun.length ? { not_run: opts.notRun } : {}),
    },
  };
}
