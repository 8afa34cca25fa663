// Metadata writes (POST/PUT/PATCH/DELETE on DIM, VAR, COST, OBJECT, MENU, SORT, DOCUMENT; level 4):
// the change is laid over the stored rows and validated like a fixture, then, in one transaction,
// written, the affected table synced, the metadata version bumped and one outbox row written per
// changed row. The registry reloads before the response, so the next request sees the change.
import { authorize } from "../../auth/authorize.ts";
import { syncTables } from "../../ddl/sync.ts";
import { ident } from "../../db/sql.ts";
import { ConflictError, MetadataError, ValidationError } from "../../errors.ts";
import { insertOutboxEvent } from "../../events/outbox.ts";
import { buildModel } from "../../metadata/build.ts";
import { bumpMetadataVersion, upsertMetadataRows } from "../../metadata/store.ts";
import { validateMetadata } from "../../metadata/validate.ts";
import type { Services } from "../../services.ts";
import type {
  MetadataChange,
  MetadataRows,
  MetadataWriteResult,
  Queryable,
  RequestContext,
  WriteAction,
} from "../../types.ts";
import { applyChange } from "./apply.ts";
import { type MetadataWriteRequest, parseMetadataRequest, type Row } from "./input.ts";
import { readMetadataRowsInTransaction } from "./rows.ts";
import { keyOf, type MetadataTable } from "./tables.ts";

export type MetadataWriteDeps = Pick<Services, "db" | "metadata">;

/** Serialises metadata writes across processes, so each validates against the latest rows. */
const METADATA_WRITE_LOCK = 724_461_003;

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
  throw err;
}

async function refuseMenuInUse(tx: Queryable, menu: Row): Promise<void> {
  const res = await tx.query<{ USER_ID: string }>(
    `SELECT "USER_ID" FROM "TB_USER_GRANT" WHERE "COD_MENU" = $1 ORDER BY "USER_ID" LIMIT 20`,
    [menu.COD_MENU],
  );
  if (res.rows.length) {
    throw new ConflictError("METADATA_IN_USE", `Menu node ${String(menu.COD_MENU)} is granted to users.`, {
      details: { users: res.rows.map((r) => r.USER_ID) },
    });
  }
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
  try {
    result = await deps.db.transaction(async (tx) => {
      await tx.query("SELECT pg_advisory_xact_lock($1)", [METADATA_WRITE_LOCK]);
      const rows = await readMetadataRowsInTransaction(tx);
      const change = applyChange(rows, input);
      if (input.op === "delete" && t.code === "MENU") await refuseMenuInUse(tx, change.existing!);
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
      if (t.code === "DIM" || t.code === "VAR" || t.code === "OBJECT") {
        const model = buildModel(rows, 0);
        const codes = new Set([change.existing?.COD_DIM, change.written?.COD_DIM]);
        await syncTables(
          tx,
          [...codes].flatMap((c) => (typeof c === "string" ? (model.dimensions.get(c) ?? []) : [])),
        );
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
    });
  } catch (err) {
    mapDataError(err);
  }
  await deps.metadata.refresh(true);
  return result;
}
