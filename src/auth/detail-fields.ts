// What of a record an event shows a caller: the fields it reads in detail (D, at its peso, in its
// context), one filter for every consumer of events (a GraphQL subscription's data,
// src/resolvers/read/events.ts; a webhook's, for its registrant, src/events/webhooks/dispatcher.ts).
import type { DimensionDef, FieldDef } from "../types.ts";

/**
 * The codes of the fields a caller reads in detail, and the key of that field set, made once per
 * set (the access view keeps one per dimension and caller profile): every subscription of one
 * profile shares them.
 */
const detailCodes = new WeakMap<readonly FieldDef[], { codes: readonly string[]; key: string }>();
export function detailFieldsOf(dim: DimensionDef, fields: readonly FieldDef[]) {
  let known = detailCodes.get(fields);
  if (!known) {
    const codes = fields.map((f) => f.code);
    known = { codes, key: `${dim.code}:${codes.join(",")}` };
    detailCodes.set(fields, known);
  }
  return known;
}

/** An event's `data` as a caller reading `codes` in detail sees it (also a webhook's, for its registrant). */
export function detailData(
  payload: Record<string, unknown>,
  codes: readonly string[],
): Record<string, unknown> {
  const data: Record<string, unknown> = {};
  for (const code of codes) if (code in payload) data[code] = payload[code];
  return data;
}
