// The outbox's vacuum (migration 0011, issue 19 W4): after the relay marks rows, a vacuum removes
// their entries from the partial index of unpublished rows even when they sit on a small part of
// a large table (where PostgreSQL would skip the indexes), so the next claim reads a few pages,
// not every row marked since; and autovacuum counts marked rows, not a share of the table.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Services } from "../../src/services.ts";
import { createTestServices, TEST_DATABASE_URL } from "../helpers/env.ts";
import { explainRelayClaim } from "./support.ts";

if (TEST_DATABASE_URL)
  describe("the outbox's vacuum (postgres)", () => {
    let services: Services;
    beforeAll(async () => {
      services = await createTestServices("postgres");
    });
    afterAll(async () => services?.close());

    it("is set by marked rows, and always cleans the indexes", async () => {
      const { rows } = await services.db.query<{ reloptions: string[] }>(
        `SELECT reloptions FROM pg_class WHERE relname = 'TB_ANAG_OUTBOX00'`,
      );
      expect(rows[0]!.reloptions).toEqual(
        expect.arrayContaining([
          "autovacuum_vacuum_scale_factor=0",
          "autovacuum_vacuum_threshold=50000",
          "vacuum_index_cleanup=on",
        ]),
      );
    });

    it("a vacuum after marks on a large outbox leaves the next claim a few pages to read", async () => {
      const { db } = services;
      const insert = (count: number, published: boolean) =>
        db.query(
          `INSERT INTO "TB_ANAG_OUTBOX00" ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "PUBLISHED_AT")
           SELECT 'VACCreated', 'VAC', g::text, '{}', 'acme', CASE WHEN $2 THEN now() END
             FROM generate_series(1, $1::int) AS g`,
          [count, published],
        );
      // The retention's rows (published, never in the partial index), then 1,000 marked by the
      // relay: dead rows on well under 2 % of the table's pages.
      await insert(120_000, true);
      await db.query(`VACUUM "TB_ANAG_OUTBOX00"`);
      await insert(1000, false);
      await db.query(`UPDATE "TB_ANAG_OUTBOX00" SET "PUBLISHED_AT" = now() WHERE "PUBLISHED_AT" IS NULL`);
      // What autovacuum runs once the marks pass its threshold.
      await db.query(`VACUUM "TB_ANAG_OUTBOX00"`);
      await insert(10, false);
      // The first claim after the vacuum (no scan has marked any entry dead yet).
      const plan = await explainRelayClaim(db).finally(() =>
        db.query(`DELETE FROM "TB_ANAG_OUTBOX00" WHERE "AGGREGATE_TYPE" = 'VAC'`),
      );
      expect(plan.Plans?.[0]?.["Node Type"]).toBe("Index Scan");
      // The 1,000 marked rows' entries are gone: the index's root and leaf, the ten rows' page.
      // Left in the index, the first claim would visit the marked rows in the table (20+ pages).
      expect(plan["Shared Hit Blocks"] + plan["Shared Read Blocks"]).toBeLessThan(10);
    });
  });
