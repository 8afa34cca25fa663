// Media clean-up (decisions.md §13): a subscriber that removes files no record points at any more,
// after the change committed. A force delete removes everything stored for the record; any other
// change of a record removes the files of its MEDIA fields other than the current one, when older
// than a grace period (an upload in flight stores its file before its write commits).
import type { Logger } from "../logger.ts";
import { recordPrefix } from "../media/keys.ts";
import type { MediaStore } from "../media/store.ts";
import { perDefinition } from "../metadata/per-definition.ts";
import type { MetadataRegistry } from "../metadata/registry.ts";
import { removeOtherFiles } from "../resolvers/media.ts";
import type { FieldDef } from "../types.ts";
import { parseMessage, type ReceivedEvent } from "./bus.ts";

export const MEDIA_GRACE_MS = 10 * 60 * 1000;

/** A dimension's MEDIA fields (once per definition). */
const mediaFields = perDefinition((dim): readonly FieldDef[] =>
  dim.fields.filter((f) => f.dataType === "MEDIA"),
);

export function createMediaCollector(deps: {
  media: MediaStore;
  metadata: MetadataRegistry;
  logger: Logger;
  graceMs?: number;
}) {
  const grace = deps.graceMs ?? MEDIA_GRACE_MS;
  return async (event: ReceivedEvent): Promise<void> => {
    const m = parseMessage(event);
    const dim = deps.metadata.current().dimensions.get(m.AGGREGATE_TYPE);
    if (!dim) return;
    const fields = mediaFields(dim);
    if (fields.length === 0) return;
    const payload = m.PAYLOAD ?? {};
    if (m.EVENT_TYPE === `${dim.code}Deleted` && payload.force === true) {
      const prefix = recordPrefix(m.TENANT_ID, dim.code, m.AGGREGATE_ID);
      const keys = (await deps.media.list(prefix)).map((o) => o.key);
      await deps.media.delete(keys);
      return;
    }
    const olderThan = new Date(Date.now() - grace);
    for (const f of fields) {
      const value = payload[f.code] as { file_id?: unknown } | null | undefined;
      const keep = typeof value?.file_id === "string" ? value.file_id : null;
      await removeOtherFiles(deps.media, m.TENANT_ID, dim.code, m.AGGREGATE_ID, f.code, keep, olderThan);
    }
  };
}
