// Migrations (src/db/migrate.ts): applied once, recorded, safe to run twice and concurrently, and a
// migration changed after it was applied is refused.
import { cp, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type DatabaseHandle, openPostgres } from "../../src/db/database.ts";
import { MIGRATIONS_DIR, migrate, readMigrations } from "../../src/db/migrate.ts";
import { createReadinessCheck } from "../../src/db/readiness.ts";
import { BACKENDS, createTestDatabase } from "../helpers/env.ts";

async function migrationRows(db: DatabaseHandle) {
  const res = await db.query<{ name: string; checksum: string }>(
    `SELECT "name", "checksum" FROM "_dimensio_migrations" ORDER BY "name"`,
  );
  return res.rows;
}

async function tableExists(db: DatabaseHandle, name: string): Promise<boolean> {
  const res = await db.query(
    `SELECT 1 FROM information_schema.tables WHERE table_schema = current_schema() AND table_name = $1`,
    [name],
  );
  return res.rows.length > 0;
}

describe.each(BACKENDS)("migrations on %s", (backend) => {
  let names: string[] = [];
  let db: DatabaseHandle;
  let dir: string;
  beforeAll(async () => {
    names = (await readdir(MIGRATIONS_DIR, { withFileTypes: true }))
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
    db = await createTestDatabase(backend);
    // A copy of the migrations this file may change.
    dir = await mkdtemp(path.join(tmpdir(), "dimensio-migrations-"));
    await cp(MIGRATIONS_DIR, dir, { recursive: true });
  });
  afterAll(async () => {
    await db?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("reads every migration directory in name order with a sha256 checksum", async () => {
    const migrations = await readMigrations();
    expect(migrations.map((m) => m.name)).toEqual(names);
    expect(names.length).toBeGreaterThan(0);
    for (const m of migrations) expect(m.checksum).toMatch(/^[0-9a-f]{64}$/);
  });

  it("readiness says migrations pending on a fresh database", async () => {
    expect(await createReadinessCheck(db)()).toEqual({
      database: 'unreachable: relation "_dimensio_migrations" does not exist',
      migrations: "pending",
    });
  });

  it("applies every migration once and records it; readiness then says ok", async () => {
    const first = await migrate(db);
    expect(first.applied).toEqual(names);
    expect(await createReadinessCheck(db)()).toEqual({ database: "ok", migrations: "ok" });
    const rows = await migrationRows(db);
    expect(rows.map((r) => r.name)).toEqual(names);
    expect(rows.map((r) => r.checksum)).toEqual((await readMigrations()).map((m) => m.checksum));
    // The first migration's tables exist and the metadata version starts at 1.
    const state = await db.query<{ VERSION: number }>(`SELECT "VERSION" FROM "TB_META_STATE"`);
    expect(state.rows).toEqual([{ VERSION: 1 }]);
  });

  it("the second run applies nothing and changes nothing", async () => {
    const before = await migrationRows(db);
    expect((await migrate(db)).applied).toEqual([]);
    expect((await migrate(db, dir)).applied).toEqual([]);
    expect(await migrationRows(db)).toEqual(before);
  });

  it("a new migration added later is pending until the next run applies it", async () => {
    await cp(path.join(dir, names[0]!), path.join(dir, "9999_extra"), { recursive: true });
    await writeFile(path.join(dir, "9999_extra", "migration.sql"), `CREATE TABLE "extra_t" ("x" INTEGER);`);
    expect((await createReadinessCheck(db, dir)()).migrations).toBe("pending");
    expect((await migrate(db, dir)).applied).toEqual(["9999_extra"]);
    expect((await createReadinessCheck(db, dir)()).migrations).toBe("ok");
    expect(await tableExists(db, "extra_t")).toBe(true);
  });

  it("a migration changed after it was applied is refused and nothing more is applied", async () => {
    const first = names[0]!;
    await writeFile(path.join(dir, first, "migration.sql"), "SELECT 1;\n");
    await cp(path.join(dir, "9999_extra"), path.join(dir, "9999_more"), { recursive: true });
    await writeFile(
      path.join(dir, "9999_more", "migration.sql"),
      `CREATE TABLE "should_not_exist" ("x" INTEGER);`,
    );
    await expect(migrate(db, dir)).rejects.toThrow(`Migration ${first} was changed after it was applied`);
    expect(await tableExists(db, "should_not_exist")).toBe(false);
    expect((await migrationRows(db)).map((r) => r.name)).toEqual([...names, "9999_extra"]);
  });

  it("two concurrent migrate() calls both succeed and record each migration once", async () => {
    const fresh = await createTestDatabase(backend);
    // PostgreSQL: two separate handles (two pools) on the same fresh database; PGlite: one handle.
    const other = fresh.kind === "postgres" ? openPostgres(fresh.connectionString) : fresh;
    try {
      const [a, b] = await Promise.all([migrate(fresh), migrate(other)]);
      expect([...a.applied, ...b.applied].sort()).toEqual(names);
      expect(a.applied.length === 0 || b.applied.length === 0).toBe(true);
      expect((await migrationRows(fresh)).map((r) => r.name)).toEqual(names);
      expect((await createReadinessCheck(other)()).migrations).toBe("ok");
    } finally {
      if (other !== fresh) await other.close();
      await fresh.close();
    }
  });

  it("readiness reports a closed database instead of throwing", async () => {
    const check = createReadinessCheck(db);
    expect(await check()).toEqual({ database: "ok", migrations: "ok" });
    await db.close();
    const after = await check();
    expect(after.database).toMatch(/^unreachable: /);
  });
});
