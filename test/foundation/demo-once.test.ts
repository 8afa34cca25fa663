// The demo data is loaded once when processes start together on an empty PostgreSQL database (the
// separate roles of README's "Separate processes"): the look and the load hold an advisory lock,
// so the others find it loaded and print no logins (src/demo/load-demo.ts).
import { afterAll, beforeAll, expect, it } from "vitest";
import { loadDemoDataIfEmpty } from "../../src/demo/load-demo.ts";
import type { Services } from "../../src/services.ts";
import { createTestServices } from "../helpers/env.ts";

const hasPostgres = Boolean(process.env.TEST_DATABASE_URL);
let services: Services | undefined;

beforeAll(async () => {
  if (hasPostgres) services = await createTestServices("postgres");
}, 120_000);
afterAll(async () => {
  await services?.close();
});

it.runIf(hasPostgres)(
  "three loads started together on an empty database: one loads and prints, two find it loaded",
  async () => {
    const loads = await Promise.all([1, 2, 3].map(() => loadDemoDataIfEmpty(services!)));
    expect(loads.filter((l) => l !== null)).toHaveLength(1);
    const { rows } = await services!.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM "TB_USER"`);
    expect(rows[0]!.n).toBe(loads.find((l) => l !== null)!.length);
  },
);
