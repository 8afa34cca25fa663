// Where access views are kept: one bounded LRU per metadata model (MetadataModel.accessViews, made
// by buildModel), so a metadata change drops every view with the model it was computed from. Two
// levels: whole views per grant key (grants, peso, center_dett, source), and the field rules they
// share per (peso, center_dett), since those do not depend on grants or source.
import { LRUCache } from "lru-cache";
import type { AccessView, FieldRules } from "./access-view.ts";

/** Views kept per metadata version; the least recently used goes first. */
export const MAX_ACCESS_VIEWS = 2000;
/** Field rules kept per metadata version (one per peso and center_dett in use). */
export const MAX_FIELD_RULES = 200;

export interface ViewCache {
  /** The view for `key`, computed by `make` on a miss and kept. */
  view(key: string, make: () => AccessView): AccessView;
  /** The field rules for `key`, computed by `make` on a miss and kept. */
  fieldRules(key: string, make: () => FieldRules): FieldRules;
  /** How many views are kept (tests, metrics). */
  size(): number;
}

/** The value kept for `key`, or `make`'s, kept from now on. */
function keptOrMade<V extends object>(cache: LRUCache<string, V>, key: string, make: () => V): V {
  let found = cache.get(key);
  if (!found) {
    found = make();
    cache.set(key, found);
  }
  return found;
}

export function createViewCache(options: { maxViews?: number; maxFieldRules?: number } = {}): ViewCache {
  const views = new LRUCache<string, AccessView>({ max: options.maxViews ?? MAX_ACCESS_VIEWS });
  const rules = new LRUCache<string, FieldRules>({ max: options.maxFieldRules ?? MAX_FIELD_RULES });
  return {
    view: (key, make) => keptOrMade(views, key, make),
    fieldRules: (key, make) => keptOrMade(rules, key, make),
    size: () => views.size,
  };
}
