// What a NOTIFY of committed transactions says changed (its payload): the items the commits it
// covers named, one per line, so that a listener can forget only what they changed. An empty
// payload says "anything may have changed": a commit that named no item, a notice that would
// have grown past NOTICE_MAX_BYTES (PostgreSQL refuses payloads of 8,000 bytes; and a listener
// gains little from a long list), or the listening connection back after a loss.

/** The longest payload that names its items; a longer one is sent empty (anything changed). */
export const NOTICE_MAX_BYTES = 1000;

/** Items past this many are not collected one by one (they could not fit in a payload). */
const MAX_ITEMS = 100;

/** What commits changed: the items they named, or "all" (one named none, or too many). */
export type NoticeItems = Set<string> | "all";

/** `item` (undefined: the commit named none) as NoticeItems. */
export function noticeItemsOf(item: string | undefined): NoticeItems {
  return item === undefined || item === "" || item.includes("\n") ? "all" : new Set([item]);
}

/** `into` with `more` added (`into` may be changed); null stands for nothing yet. */
export function addNoticeItems(into: NoticeItems | null, more: NoticeItems | null): NoticeItems | null {
  if (into === null) return more === null || more === "all" ? more : new Set(more);
  if (more === null) return into;
  if (into === "all" || more === "all") return "all";
  for (const item of more) into.add(item);
  return into.size > MAX_ITEMS ? "all" : into;
}

/** The payload that says `items` changed. */
export function noticePayload(items: NoticeItems): string {
  if (items === "all") return "";
  const payload = [...items].join("\n");
  return Buffer.byteLength(payload) <= NOTICE_MAX_BYTES ? payload : "";
}

/** The items a payload names; null when it names none (anything may have changed). */
export function itemsOfNotice(payload: string): string[] | null {
  return payload === "" ? null : payload.split("\n");
}
