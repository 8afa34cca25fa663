// Helpers of the write tests: hand-built request contexts for the sample users, a variant of the
// sample fixture, and a snapshot of everything a write can change.
import { readFile } from "node:fs/promises";
import type { Services } from "../../src/services.ts";
import type { Grant, RequestContext } from "../../src/types.ts";
import { SAMPLE_FIXTURE } from "../helpers/env.ts";

const GRANTS: Record<string, { tenantId: string; peso: number; centroDett: string; grants: Grant[] }> = {
  anna: {
    tenantId: "acme",
    peso: 1,
    centroDett: "HQ",
    grants: [
      { COD_MENU: "erp", NLEFT: 1, NRIGHT: 22, OPERATIONS: ["read", "write", "force_delete"], LEVEL: 4 },
      { COD_MENU: "price-1", NLEFT: 23, NRIGHT: 24, OPERATIONS: ["read", "write"], LEVEL: 4 },
    ],
  },
  marco: {
    tenantId: "acme",
    peso: 2,
    centroDett: "MI01",
    grants: [
      { COD_MENU: "anag", NLEFT: 2, NRIGHT: 9, OPERATIONS: ["read", "write"], LEVEL: 3 },
      { COD_MENU: "sales", NLEFT: 16, NRIGHT: 21, OPERATIONS: ["read", "write"], LEVEL: 2 },
      { COD_MENU: "catalog", NLEFT: 10, NRIGHT: 15, OPERATIONS: ["read"], LEVEL: 1 },
    ],
  },
  greta: {
    tenantId: "globex",
    peso: 1,
    centroDett: "HQ",
    grants: [
      { COD_MENU: "erp", NLEFT: 1, NRIGHT: 22, OPERATIONS: ["read", "write", "force_delete"], LEVEL: 4 },
    ],
  },
};

/** The RequestContext the identity layer would build for a sample user. */
export function contextFor(
  user: "anna" | "marco" | "greta",
  source: string | null,
  opts: { centerDett?: string | null; now?: () => Date } = {},
): RequestContext {
  const g = GRANTS[user]!;
  return {
    principal: {
      userId: user,
      tenantId: g.tenantId,
      sessionId: "t",
      peso: g.peso,
      centroDett: g.centroDett,
      ambiente: "production",
      lingua: "it",
      grants: g.grants,
    },
    source,
    centerDett: opts.centerDett === undefined ? g.centroDett : opts.centerDett,
    requestId: "t",
    now: opts.now ?? (() => new Date()),
  };
}

/** sample.json with changes (tests that need cascades or rules the sample does not have). */
export async function sampleFixtureWith(
  change: (fixture: Record<string, Array<Record<string, unknown>>>) => void,
): Promise<Record<string, unknown>> {
  const fixture = JSON.parse(await readFile(SAMPLE_FIXTURE, "utf8"));
  change(fixture);
  return fixture;
}

/** Sets columns of one fixture row found by `match`. */
export function setRow(
  rows: Array<Record<string, unknown>> | undefined,
  match: Record<string, unknown>,
  values: Record<string, unknown>,
): void {
  const row = rows?.find((r) => Object.entries(match).every(([k, v]) => r[k] === v));
  if (!row) throw new Error(`no fixture row ${JSON.stringify(match)}`);
  Object.assign(row, values);
}

/**
 * Adds a field to a fixture's dimension: its TB_VAR row and a TB_COST row showing it everywhere
 * (LDRNM) in the main group, both numbered `num`; `field` holds the TB_VAR columns that differ.
 */
export function addField(
  fixture: Record<string, Array<Record<string, unknown>>>,
  dim: string,
  num: number,
  field: { COD_VAR: string; DESC_VAR: string; DATA_TYPE: string; LENGTH: number } & Record<string, unknown>,
): void {
  fixture.TB_VAR!.push({
    COD_DIM: dim,
    NUM_VAR: num,
    NULLABLE: true,
    TIPO_CAMPO: null,
    TIPO_VAR: null,
    ...field,
  });
  fixture.TB_COST!.push({
    COD_DIM: dim,
    NUM_COST: num,
    COD_VAR: field.COD_VAR,
    COD_ON_OFF: "LDRNM",
    REQUIRED: false,
    RENDER_HINT: null,
    GROUP_NAME: "main",
    VALUE_TEMP: null,
    COD_UTENTE: null,
  });
}

/** Every row of every table a write may touch, for "nothing changed" comparisons. */
export async function snapshot(services: Services): Promise<Record<string, unknown[]>> {
  const tables = [...services.metadata.current().dimensions.values()].map((d) => d.tableName);
  const out: Record<string, unknown[]> = {};
  for (const t of [...tables, "TB_ANAG_OUTBOX00", "TB_SEQUENCE"]) {
    out[t] = (await services.db.query(`SELECT * FROM "${t}" ORDER BY 1, 2`)).rows;
  }
  return out;
}

export async function outboxRows(services: Services, afterId = 0) {
  return (
    await services.db.query<{
      OUTBOX_ID: number;
      EVENT_TYPE: string;
      AGGREGATE_TYPE: string;
      AGGREGATE_ID: string;
      PAYLOAD: Record<string, unknown>;
      TENANT_ID: string;
      CREATED_AT: Date;
      PUBLISHED_AT: Date | null;
    }>(`SELECT * FROM "TB_ANAG_OUTBOX00" WHERE "OUTBOX_ID" > $1 ORDER BY "OUTBOX_ID"`, [afterId])
  ).rows;
}

export async function lastOutboxId(services: Services): Promise<number> {
  const res = await services.db.query<{ m: number | null }>(
    `SELECT max("OUTBOX_ID") AS m FROM "TB_ANAG_OUTBOX00"`,
  );
  return Number(res.rows[0]?.m ?? 0);
}

export async function row(services: Services, table: string, idField: string, id: unknown) {
  return (await services.db.query(`SELECT * FROM "${table}" WHERE "${idField}" = $1`, [id])).rows[0] as
    | Record<string, unknown>
    | undefined;
}
