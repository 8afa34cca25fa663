// Migrations (src/db/migrate.ts): applied once, recorded, safe to run twice and concurrently, and a
// migration changed after it was applied is refused.
import { cp, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { openPostgres } from "../../src/db/database.ts";
import { MIGRATIONS_DIR, migrate, migrationsApplied, readMigrations } from "../../src/db/migrate.ts";
import { BACKENDS, createTestDatabase } from "../helpers/env.ts";

async function migrationRows(db: { query: (sql: string) => Promise<{ rows: unknown[] }> }) {
  const res = await db.query(`SELECT "name", "checksum" FROM "_dimensio_migrations" ORDER BY "name"`);
  return res.rows as Array<{ name: string; checksum: string }>;
}

describe.each(BACKENDS)("migrations on %s", (backend) => {
  let names: string[] = [];
  beforeAll(async () => {
    names = (await readdir(MIGRATIONS_DIR, { withFileTypes: true }))
      .filter((e) => e.isDirectory())
      .map((e) => e.name)
      .sort();
  });

  it("reads every migration directory in name order with a sha256 checksum", async () => {
    const migrations = await readMigrations();
    expect(migrations.map((m) => m.name)).toEqual(names);
    expect(names.length).toBeGreaterThan(0);
    for (const m of migrations) expect(m.checksum).toMatch(/^[0-9a-f]{64}$/);
  });

  it("applies every migration once; the second run applies nothing", async () => {
    const db = await createTestDatabase(backend);
    try {
      expect(await migrationsApplied(db)).toBe(false);
      const first = await migrate(db);
      expect(first.applied).toEqual(names);
      expect(await migrationsApplied(db)).toBe(true);
      const second = await migrate(db);
      expect(second.applied).toEqual([]);
      const rows = await migrationRows(db);
      expect(rows.map((r) => r.name)).toEqual(names);
      const expected = await readMigrations();
      expect(rows.map((r) => r.checksum)).toEqual(expected.map((m) => m.checksum));
      // The tables of the first migration exist and the metadata version starts at 1.
      const state = await db.query<{ VERSION: number }>(`SELECT "VERSION" FROM "TB_META_STATE"`);
      expect(state.rows).toEqual([{ VERSION: 1 }]);
    } finally {
      await db.close();
    }
  });

  it("two concurrent migrate() calls both succeed and record each migration once", async () => {
    const db = await createTestDatabase(backend);
    // PostgreSQL: two separate handles (two pools) on the same fresh database; PGlite: one handle.
    const other = db.kind === "postgres" ? openPostgres(db.connectionString) : db;
    try {
      const [a, b] = await Promise.all([migrate(db), migrate(other)]);
      expect([...a.applied, ...b.applied].sort()).toEqual(names);
      expect(a.applied.length === 0 || b.applied.length === 0).toBe(true);
      const rows = await migrationRows(db);
      expect(rows.map((r) => r.name)).toEqual(names);
      expect(await migrationsApplied(other)).toBe(true);
    } finally {
      if (other !== db) await other.close();
      await db.close();
    }
  });

  describe("with a migrations directory of its own", () => {
    let dir: string;
    beforeAll(async () => {
      dir = await mkdtemp(path.join(tmpdir(), "dimensio-migrations-"));
      await cp(MIGRATIONS_DIR, dir, { recursive: true });
    });
    afterAll(async () => {
      await rm(dir, { recursive: true, force: true });
    });

    it("a migration changed after it was applied is refused and nothing more is applied", async () => {
      const db = await createTestDatabase(backend);
      try {
        await migrate(db, dir);
        const first = names[0]!;
        await writeFile(path.join(dir, first, "migration.sql"), "SELECT 1;\n");
        await rm(path.join(dir, "9999_extra"), { recursive: true, force: true });
        await cp(path.join(dir, first), path.join(dir, "9999_extra"), { recursive: true });
        await writeFile(
          path.join(dir, "9999_extra", "migration.sql"),
          `CREATE TABLE "should_not_exist" ("x" INTEGER);`,
        );
        await expect(migrate(db, dir)).rejects.toThrow(`Migration ${first} was changed after it was applied`);
        const exists = await db.query(
          `SELECT 1 FROM information_schema.tables WHERE table_name = 'should_not_exist'`,
        );
        expect(exists.rows).toHaveLength(0);
        expect((await migrationRows(db)).map((r) => r.name)).toEqual(names);
        // A new migration is "pending" for readiness until it is applied.
        expect(await migrationsApplied(db, dir)).toBe(false);
        expect(await migrationsApplied(db)).toBe(true);
      } finally {
        await db.close();
      }
    });

    it("a new migration added later is applied on the next run", async () => {
      const fresh = await mkdtemp(path.join(tmpdir(), "dimensio-migrations-"));
      const db = await createTestDatabase(backend);
      try {
        await cp(MIGRATIONS_DIR, fresh, { recursive: true });
        await migrate(db, fresh);
        await cp(path.join(fresh, names[0]!), path.join(fresh, "9999_extra"), { recursive: true });
        await writeFile(
          path.join(fresh, "9999_extra", "migration.sql"),
          `CREATE TABLE "extra_t" ("x" INTEGER);`,
        );
        expect(await migrationsApplied(db, fresh)).toBe(false);
        expect((await migrate(db, fresh)).applied).toEqual(["9999_extra"]);
        expect(await migrationsApplied(db, fresh)).toBe(true);
        await db.query(`INSERT INTO "extra_t" ("x") VALUES (1)`);
      } finally {
        await db.close();
        await rm(fresh, { recursive: true, force: true });
      }
    });
  });

  it("migrationsApplied is false on a closed database instead of throwing", async () => {
    const db = await createTestDatabase(backend);
    await migrate(db);
    await db.close();
    expect(await migrationsApplied(db)).toBe(false);
  });
});
