// One nesting limit for JSON everywhere (request bodies, JSON/MEDIA field values, fixtures):
// deeper values are refused before any recursive code (JSON.stringify included) can overflow.

/** How deep a JSON value may nest (arrays and objects; [[1]] is 2 levels). */
export const MAX_JSON_DEPTH = 64;

/** Whether `value` nests arrays and objects more than `limit` levels deep (iteratively). */
export function exceedsDepth(value: unknown, limit = MAX_JSON_DEPTH): boolean {
  const pending: Array<[unknown, number]> = [[value, 0]];
  for (let next = pending.pop(); next; next = pending.pop()) {
    const [v, depth] = next;
    if (v === null || typeof v !== "object") continue;
    if (depth + 1 > limit) return true;
    for (const child of Object.values(v)) pending.push([child, depth + 1]);
  }
  return false;
}
