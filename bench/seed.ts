// Bench data: `count` customers of the sample fixture's tenant acme in TB_ANAG_CUST00, spread over
// the given cities, each with a unique CODE (NOT NULL), and the table analysed.
import type { Queryable } from "../src/types.ts";

export async function seedCustomers(
  db: Queryable,
  count: number,
  cities: readonly string[] = ["MI", "RM", "TO"],
): Promise<void> {
  await db.query(
    `INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "CITY_ID", "EMAIL", "CREDIT_LIMIT", "VIP", "TREC", "CDATA", "OWNER", "TENANT_ID")
     SELECT 'Bench customer ' || g, 'B-' || lpad(g::text, 7, '0'), ($2::text[])[1 + g % cardinality($2::text[])],
            'c' || g || '@bench.example', (g % 1000) * 100.5, g % 2 = 0, 'N', '20260101000000', 'bench', 'acme'
       FROM generate_series(1, $1::int) AS g`,
    [count, cities],
  );
  await db.query(`ANALYZE "TB_ANAG_CUST00"`);
}
