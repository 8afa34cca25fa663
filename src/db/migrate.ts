// Applies prisma/migrations/*/migration.sql in name order, once each, recorded in
// "_dimensio_migrations". One transaction holding an advisory lock: safe to run twice and from
// two processes at once (the second waits, then finds nothing left to do).
import { createHash } from "node:crypto";
import { readdir, readFile } from "node:fs/promises";
import path from "node:path";
import { projectRoot } from "../paths.ts";
import type { DatabaseHandle } from "./database.ts";

export const MIGRATIONS_DIR = path.join(projectRoot(), "prisma/migrations");
const LOCK_KEY = 724_461_001; // arbitrary, constant: identifies Dimensio's migration lock

export interface Migration {
  name: string;
  sql: string;
  checksum: string;
}

export async function readMigrations(dir = MIGRATIONS_DIR): Promise<Migration[]> {
  const entries = (await readdir(dir, { withFileTypes: true }))
    .filter((e) => e.isDirectory())
    .map((e) => e.name);
  entries.sort();
  const out: Migration[] = [];
  for (const name of entries) {
    const sql = await readFile(path.join(dir, name, "migration.sql"), "utf8");
    out.push({ name, sql, checksum: createHash("sha256").update(sql).digest("hex") });
  }
  return out;
}

export async function migrate(db: DatabaseHandle, dir = MIGRATIONS_DIR): Promise<{ applied: string[] }> {
  const migrations = await readMigrations(dir);
  return db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock($1)", [LOCK_KEY]);
    await tx.exec(`CREATE TABLE IF NOT EXISTS "_dimensio_migrations" (
      "name" VARCHAR(200) PRIMARY KEY,
      "checksum" VARCHAR(64) NOT NULL,
      "applied_at" TIMESTAMPTZ NOT NULL DEFAULT now())`);
    const done = await tx.query<{ name: string; checksum: string }>(
      `SELECT "name", "checksum" FROM "_dimensio_migrations"`,
    );
    const doneByName = new Map(done.rows.map((r) => [r.name, r.checksum]));
    const applied: string[] = [];
    for (const m of migrations) {
      const prior = doneByName.get(m.name);
      if (prior !== undefined) {
        if (prior !== m.checksum) {
          throw new Error(
            `Migration ${m.name} was changed after it was applied; add a new migration instead.`,
          );
        }
        continue;
      }
      await tx.exec(m.sql);
      await tx.query(`INSERT INTO "_dimensio_migrations" ("name", "checksum") VALUES ($1, $2)`, [
        m.name,
        m.checksum,
      ]);
      applied.push(m.name);
    }
    return { applied };
  });
}
