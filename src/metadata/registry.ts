// Holds the current MetadataModel of the database. Rebuilt when the metadata version moves:
// at once after this process's own metadata writes (refresh()), and on NOTIFY from others.
import type { Database, MetadataModel } from "../types.ts";
import { buildModel } from "./build.ts";
import { METADATA_CHANNEL, readMetadataRows, readMetadataVersion } from "./store.ts";

export interface MetadataRegistry {
  /** The current model. Throws before start(). */
  current(): MetadataModel;
  /** Reloads when the stored version differs from the one held (or always, with force). */
  refresh(force?: boolean): Promise<MetadataModel>;
  onChange(listener: (model: MetadataModel) => void): () => void;
  start(): Promise<MetadataModel>;
  stop(): Promise<void>;
}

export function createMetadataRegistry(deps: { db: Database }): MetadataRegistry {
  let model: MetadataModel | null = null;
  let inFlight: Promise<MetadataModel> | null = null;
  let unlisten: (() => Promise<void>) | null = null;
  const listeners = new Set<(m: MetadataModel) => void>();

  async function load(force: boolean): Promise<MetadataModel> {
    const version = await readMetadataVersion(deps.db);
    if (!force && model && model.version === version) return model;
    const rows = await readMetadataRows(deps.db);
    const next = buildModel(rows, version);
    const changed = !model || model.version !== next.version || force;
    model = next;
    if (changed) for (const l of listeners) l(next);
    return next;
  }

  function run(force: boolean): Promise<MetadataModel> {
    inFlight = load(force).finally(() => {
      inFlight = null;
    });
    return inFlight;
  }

  // A reload already running may have read the version before the change that prompted this
  // call: queue one more reload after it (shared by every caller that arrives meanwhile).
  let queued: Promise<MetadataModel> | null = null;
  let queuedForce = false;
  function refresh(force = false): Promise<MetadataModel> {
    if (!inFlight) return run(force);
    if (queued) {
      queuedForce ||= force;
      return queued;
    }
    queuedForce = force;
    queued = inFlight
      .catch(() => undefined)
      .then(() => {
        queued = null;
        return run(queuedForce);
      });
    return queued;
  }

  return {
    current() {
      if (!model) throw new Error("metadata registry not started");
      return model;
    },
    refresh,
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    async start() {
      unlisten = await deps.db.listen(METADATA_CHANNEL, () => {
        refresh().catch(() => {});
      });
      return refresh(true);
    },
    async stop() {
      if (unlisten) await unlisten();
      unlisten = null;
    },
  };
}
