// The metadata registry (src/metadata/registry.ts): holds the current model, rebuilds it when the
// metadata version moves (refresh after own writes, NOTIFY from other processes).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseHandle, openPostgres } from "../../src/db/database.ts";
import { createMetadataRegistry } from "../../src/metadata/registry.ts";
import { bumpMetadataVersion, upsertMetadataRows } from "../../src/metadata/store.ts";
import type { Services } from "../../src/services.ts";
import type { Database, MetadataModel } from "../../src/types.ts";
import { BACKENDS, createTestServices } from "../helpers/env.ts";

async function until<T>(probe: () => T | Promise<T>, ok: (v: T) => boolean, ms = 5000): Promise<T> {
  const deadline = Date.now() + ms;
  let last = await probe();
  while (!ok(last)) {
    if (Date.now() > deadline)
      throw new Error(`condition not met within ${ms} ms; last value ${String(last)}`);
    await new Promise((r) => setTimeout(r, 25));
    last = await probe();
  }
  return last;
}

const DIM_ROWS = (code: string, desc: string) => ({
  TB_DIM: [{ COD_DIM: code, DESC_DIM: desc, TABLE_NAME: `TB_${code}`, ID_FIELD: `${code}_ID` }],
  TB_VAR: [{ COD_DIM: code, NUM_VAR: 1, COD_VAR: `${code}_ID`, DATA_TYPE: "INTEGER" }],
});

/** Writes metadata and bumps the version in one transaction, as a metadata write does. */
async function writeMetadata(db: DatabaseHandle, code: string, desc: string): Promise<number> {
  return db.transaction(async (tx) => {
    await upsertMetadataRows(tx, DIM_ROWS(code, desc));
    return bumpMetadataVersion(tx);
  });
}

describe.each(BACKENDS)("metadata registry on %s", (backend) => {
  let services: Services;
  beforeAll(async () => {
    services = await createTestServices(backend);
  });
  afterAll(async () => {
    await services?.close();
  });

  it("starts at version 1 with no dimensions", () => {
    const m = services.metadata.current();
    expect(m.version).toBe(1);
    expect(m.dimensions.size).toBe(0);
  });

  it("current() before start() throws", () => {
    const reg = createMetadataRegistry({ db: services.db });
    expect(() => reg.current()).toThrow("metadata registry not started");
  });

  it("refresh() picks up a committed change and bumps the version; onChange is told", async () => {
    const seen: number[] = [];
    const off = services.metadata.onChange((m) => seen.push(m.version));
    const before = services.metadata.current().version;
    const version = await writeMetadata(services.db, "REGA", "first");
    expect(version).toBe(before + 1);
    const m = await services.metadata.refresh();
    expect(m.version).toBe(version);
    expect(m.dimensions.get("REGA")?.description).toBe("first");
    expect(services.metadata.current()).toBe(m);
    expect(seen).toContain(version);
    off();
    // Nothing changed: refresh returns the same model object.
    expect(await services.metadata.refresh()).toBe(m);
    // force rebuilds even at the same version.
    const forced = await services.metadata.refresh(true);
    expect(forced).not.toBe(m);
    expect(forced.version).toBe(m.version);
  });

  it("a change committed on the same database reaches the registry by NOTIFY, without refresh()", async () => {
    const version = await writeMetadata(services.db, "REGB", "by notify");
    const m = await until(
      () => services.metadata.current(),
      (x) => x.version === version,
    );
    expect(m.dimensions.get("REGB")?.description).toBe("by notify");
  });

  it("a refresh asked for while a reload is running is not lost", async () => {
    // A registry whose first metadata read waits at a gate, after it has read the version.
    let release!: () => void;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    let reached!: () => void;
    const atGate = new Promise<void>((r) => {
      reached = r;
    });
    let gated = false;
    const db = services.db;
    const slowDb: Database = {
      kind: db.kind,
      transaction: (fn) => db.transaction(fn),
      listen: (channel, onPayload, opts) => db.listen(channel, onPayload, opts),
      listenersCaughtUp: (ms) => db.listenersCaughtUp(ms),
      close: () => db.close(),
      async query(text, params, opts) {
        if (gated && text.includes(`FROM "TB_DIM"`)) {
          reached();
          await gate;
        }
        return db.query(text, params, opts);
      },
    };
    const reg = createMetadataRegistry({ db: slowDb });
    await reg.start();
    try {
      const start = reg.current().version;
      gated = true;
      const first = reg.refresh(true); // reads the version, then waits at the gate
      await atGate;
      const version = await writeMetadata(services.db, "REGC", "during reload");
      expect(version).toBeGreaterThan(start);
      const second = reg.refresh(); // the change committed after `first` read the version
      release();
      gated = false;
      await first;
      const m: MetadataModel = await second;
      expect(m.version).toBe(version);
      expect(reg.current().version).toBe(version);
    } finally {
      release();
      await reg.stop();
    }
  });

  it("after stop(), NOTIFY no longer reaches the registry", async () => {
    const reg = createMetadataRegistry({ db: services.db });
    await reg.start();
    const held = reg.current().version;
    await reg.stop();
    const version = await writeMetadata(services.db, "REGD", "after stop");
    await until(
      () => services.metadata.current().version,
      (v) => v === version,
    );
    expect(reg.current().version).toBe(held);
  });
});

// PostgreSQL only: two handles (two processes' pools) on one database.
describe.each(BACKENDS.filter((b) => b === "postgres"))(
  "metadata registry across handles on %s",
  (backend) => {
    let services: Services;
    beforeAll(async () => {
      services = await createTestServices(backend);
    });
    afterAll(async () => {
      await services?.close();
    });

    it("a change written through another DatabaseHandle to the same database is picked up via NOTIFY", async () => {
      if (services.db.kind !== "postgres") throw new Error("postgres only");
      const other = openPostgres(services.db.connectionString, { max: 2 });
      try {
        const version = await writeMetadata(other, "REGE", "from another process");
        const m = await until(
          () => services.metadata.current(),
          (x) => x.version === version,
        );
        expect(m.dimensions.get("REGE")?.description).toBe("from another process");
        // And the other way round: a registry on the other handle sees this handle's change.
        const reg = createMetadataRegistry({ db: other });
        await reg.start();
        try {
          const v2 = await writeMetadata(services.db, "REGE", "changed back here");
          const m2 = await until(
            () => reg.current(),
            (x) => x.version === v2,
          );
          expect(m2.dimensions.get("REGE")?.description).toBe("changed back here");
        } finally {
          await reg.stop();
        }
      } finally {
        await other.close();
      }
    });
  },
);
