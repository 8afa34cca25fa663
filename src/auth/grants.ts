// The caller's grant inputs: everything access depends on besides the metadata. Two requests with
// the same inputs (and metadata version) are allowed and refused the same things, so the access
// view computed from them is shared (src/auth/view-cache.ts).
import { createHash } from "node:crypto";
import type { Grant, MetadataModel, MenuNode, RequestContext } from "../types.ts";

export interface GrantInputs {
  /** TB_USER_GRANT rows with their menu nodes' bounds. */
  readonly grants: readonly Grant[];
  /** 1 admin, 2 manager, 3 user: fields weighted below it are hidden (spec 5.8.6). */
  readonly peso: number;
  /** The field-visibility context (TB_COST.CENTER_DETT). */
  readonly centerDett: string | null;
  /** The TB_MENU node the request goes through. */
  readonly source: string | null;
}

export function grantInputsOf(ctx: RequestContext): GrantInputs {
  return {
    grants: ctx.principal.grants,
    peso: ctx.principal.peso,
    centerDett: ctx.centerDett ?? null,
    source: ctx.source ?? null,
  };
}

/** The cache key of the inputs (the grant list by its hash; the metadata version keys the cache). */
export function grantKey(inputs: GrantInputs): string {
  return `${grantsHash(inputs.grants)}\u0000${inputs.peso}\u0000${inputs.centerDett ?? ""}\u0001${inputs.source ?? ""}`;
}

export function grantCovers(grant: Grant, node: MenuNode): boolean {
  return grant.NLEFT <= node.nleft && node.nright <= grant.NRIGHT;
}

/**
 * Whether the source node serves the dimension: a node with COD_DIM serves that one; a grouping
 * node serves the dimensions of the nodes below it, and dimensions no node serves at all.
 */
export function sourceServes(model: MetadataModel, node: MenuNode, dimCode: string): boolean {
  if (node.dim) return node.dim === dimCode;
  const servers = model.menu.filter((m) => m.dim === dimCode);
  return servers.length === 0 || servers.some((m) => node.nleft <= m.nleft && m.nright <= node.nright);
}

/** Hashes made already, by grant list (a cached session asks for its list's hash per request). */
const hashes = new WeakMap<readonly Grant[], string>();

export function grantsHash(grants: readonly Grant[]): string {
  let hash = hashes.get(grants);
  if (hash === undefined) {
    hash = createHash("sha256").update(JSON.stringify(grants)).digest("hex").slice(0, 32);
    hashes.set(grants, hash);
  }
  return hash;
}
