// The embedded database runs with smaller memory settings than a PostgreSQL server's defaults
// (issue 8: idle RSS of `npm start`; figures in docs/benchmarks.md), and with a transaction
// deadline that ends a request's work between statements.
import { describe, expect, it } from "vitest";
import { openPglite } from "../../src/db/database.ts";

describe("embedded database settings", () => {
  it("shared_buffers and work_mem are the reduced ones", async () => {
    const db = await openPglite(null);
    try {
      const show = async (name: string) =>
        (await db.query<Record<string, string>>(`SHOW ${name}`)).rows[0]![name];
      expect(await show("shared_buffers")).toBe("16MB");
      expect(await show("work_mem")).toBe("4MB");
    } finally {
      await db.close();
    }
  });

  it("a transaction past its deadline is refused at its next statement (504 QUERY_TIMEOUT) and rolled back", async () => {
    const db = await openPglite(null, { transactionTimeoutMs: 200 });
    try {
      await db.exec(`CREATE TABLE t (x int)`);
      const started = Date.now();
      const run = db.transaction(async (tx) => {
        for (let i = 0; ; i++) {
          await tx.query(`INSERT INTO t VALUES ($1)`, [i]);
          await tx.query(`SELECT pg_sleep(0.02)`);
        }
      });
      await expect(run).rejects.toMatchObject({ code: "QUERY_TIMEOUT", status: 504 });
      expect(Date.now() - started).toBeLessThan(5000);
      expect((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM t`)).rows[0]!.n).toBe(0);
    } finally {
      await db.close();
    }
  });
});
