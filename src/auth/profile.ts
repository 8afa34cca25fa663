// Login phases 2 and 3 of spec 5.2: the user's grants (TB_USER_GRANT with the nested-set bounds of
// TB_MENU), the context chain, the menus and boxes the grants open, and per-source DB settings.
import { type Grant, type MetadataModel, OPERATIONS, type Operation, type Queryable } from "../types.ts";
import { grantCovers, grantsHash } from "./grants.ts";

export { grantsHash };

/** TB_ANAG_SESSIONS00.CONTEXT. `grants_hash` marks the TB_USER_GRANT state GRANTS was built from. */
export interface SessionContext {
  source: string | null;
  peso: string;
  ambiente: string | null;
  centro_dett: string | null;
  lingua: string | null;
  modulo: string | null;
  uuid?: string | null;
  grants_hash: string;
}

export interface InterfaceData {
  menus: Array<{
    COD_MENU: string;
    DESC_MENU: string | null;
    NLEFT: number;
    NRIGHT: number;
    COD_DIM: string | null;
  }>;
  boxes: Array<{
    COD_MENU: string;
    COD_DIM: string;
    DESC_DIM: string | null;
    OPERATIONS: Operation[];
    LEVEL: number;
  }>;
}

export interface DbConnection {
  dimension: string;
  table_name: string;
  tenant_id: string;
  ambiente: string | null;
  read: boolean;
  write: boolean;
}

export interface Profile {
  grants: Grant[];
  context: SessionContext;
  interfaceData: InterfaceData;
  dbConnections: Record<string, DbConnection>;
}

/** SQL giving one user's grants as a JSON array, ordered by COD_MENU ($1 = USER_ID expression). */
export function grantsJsonSql(userIdExpr: string): string {
  return `(SELECT COALESCE(json_agg(json_build_object(
      'COD_MENU', g."COD_MENU", 'NLEFT', m."NLEFT", 'NRIGHT', m."NRIGHT",
      'OPERATIONS', g."OPERATIONS", 'LEVEL', g."LEVEL", 'ROW_FILTER', g."ROW_FILTER") ORDER BY g."COD_MENU"), '[]'::json)
    FROM "TB_USER_GRANT" g JOIN "TB_MENU" m ON m."COD_MENU" = g."COD_MENU"
    WHERE g."USER_ID" = ${userIdExpr})`;
}

export function normalizeGrants(raw: unknown): Grant[] {
  if (!Array.isArray(raw)) return [];
  const out: Grant[] = [];
  for (const g of raw) {
    if (!g || typeof g !== "object") continue;
    const r = g as Record<string, unknown>;
    if (typeof r.COD_MENU !== "string") continue;
    out.push({
      COD_MENU: r.COD_MENU,
      NLEFT: Number(r.NLEFT),
      NRIGHT: Number(r.NRIGHT),
      OPERATIONS: Array.isArray(r.OPERATIONS)
        ? (r.OPERATIONS.filter((o): o is Operation => OPERATIONS.includes(o as Operation)) as Operation[])
        : [],
      LEVEL: Number(r.LEVEL ?? 0),
      // Only when set: a grant without a filter keeps the shape (and hash) it always had.
      ...(typeof r.ROW_FILTER === "string" ? { ROW_FILTER: r.ROW_FILTER } : {}),
    });
  }
  return out;
}

export async function loadUserGrants(db: Queryable, userId: string): Promise<Grant[]> {
  const res = await db.query<{ grants: unknown }>(`SELECT ${grantsJsonSql("$1")} AS "grants"`, [userId]);
  return normalizeGrants(res.rows[0]?.grants);
}

/** The module of a source code of the form {microservice}-{number}. */
export function moduloOf(source: string | null): string | null {
  if (!source) return null;
  const m = /^(.+)-\d+$/.exec(source);
  return m ? m[1]! : source;
}

function mergeAccess(grants: Grant[]) {
  return {
    operations: [...new Set(grants.flatMap((g) => g.OPERATIONS))],
    level: Math.max(0, ...grants.map((g) => g.LEVEL)),
  };
}

/** Menus: every TB_MENU node a grant covers; boxes: those of them that serve a dimension. */
export function buildInterfaceData(model: MetadataModel, grants: Grant[]): InterfaceData {
  const data: InterfaceData = { menus: [], boxes: [] };
  const nodes = [...model.menu].sort((a, b) => a.nleft - b.nleft);
  for (const node of nodes) {
    const covering = grants.filter((g) => grantCovers(g, node));
    if (!covering.length) continue;
    data.menus.push({
      COD_MENU: node.code,
      DESC_MENU: node.description,
      NLEFT: node.nleft,
      NRIGHT: node.nright,
      COD_DIM: node.dim,
    });
    if (node.dim) {
      const access = mergeAccess(covering);
      data.boxes.push({
        COD_MENU: node.code,
        COD_DIM: node.dim,
        DESC_DIM: model.dimensions.get(node.dim)?.description ?? null,
        OPERATIONS: access.operations,
        LEVEL: access.level,
      });
    }
  }
  return data;
}

/** Per-source database settings: which table a source reaches, in which tenant, with what access. */
export function buildDbConnections(
  model: MetadataModel,
  grants: Grant[],
  tenantId: string,
  ambiente: string | null,
): Record<string, DbConnection> {
  const out: Record<string, DbConnection> = {};
  for (const node of model.menu) {
    if (!node.dim) continue;
    const dim = model.dimensions.get(node.dim);
    const covering = grants.filter((g) => grantCovers(g, node));
    if (!dim || !covering.length) continue;
    const access = mergeAccess(covering);
    out[node.code] = {
      dimension: dim.code,
      table_name: dim.tableName,
      tenant_id: tenantId,
      ambiente,
      read: access.operations.includes("read"),
      write: access.operations.includes("write"),
    };
  }
  return out;
}

export interface ProfileUser {
  userId: string;
  tenantId: string;
  peso: string;
  centroDett: string | null;
  ambiente: string | null;
  lingua: string | null;
}

export function buildProfile(
  model: MetadataModel,
  user: ProfileUser,
  grants: Grant[],
  login: { source: string | null; centroDett: string | null; uuid?: string | null },
): Profile {
  const context: SessionContext = {
    source: login.source,
    peso: user.peso,
    ambiente: user.ambiente,
    centro_dett: login.centroDett ?? user.centroDett,
    lingua: user.lingua,
    modulo: moduloOf(login.source),
    grants_hash: grantsHash(grants),
  };
  if (login.uuid) context.uuid = login.uuid;
  return {
    grants,
    context,
    interfaceData: buildInterfaceData(model, grants),
    dbConnections: buildDbConnections(model, grants, user.tenantId, user.ambiente),
  };
}
