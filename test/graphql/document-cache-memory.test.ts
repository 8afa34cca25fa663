// The document cache's bound is a bound on heap (GRAPHQL_DOCUMENT_CACHE_BYTES): a client sending
// distinct documents (values written into the text instead of variables) makes the service keep no
// more than it. What a kept document holds is its AST, about 290 bytes a token, and what the chain
// derives from it while it is kept (validation, costs, plans, look-aheads): about 400 bytes a token
// in all; weighed at ten times its text, as it was, a 16 MiB cache held about 150 MB of small
// documents (bench/soak: RSS 272 → 474 MB in ten minutes). Measured here as the live heap after
// full collections, through the whole GraphQL path of a service on the embedded database.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

const CACHE_BYTES = 2 * 1024 * 1024;

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** The live heap after full collections. */
function liveHeap(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed;
}

describe("the document cache's bound", () => {
  let t: TestApp;
  let headers: Record<string, string>;

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, GRAPHQL_DOCUMENT_CACHE_BYTES: String(CACHE_BYTES) },
    });
    headers = {
      ...bearer(await loginAs(t.app, "anna", SAMPLE_USERS.anna.password)),
      "content-type": "application/json",
    };
  });
  afterAll(async () => {
    await t?.close();
  });

  /** Documents `from`…`to - 1`: each its own text (a value written in), each run through the service. */
  async function sendDistinct(from: number, to: number): Promise<void> {
    for (let i = from; i < to; i += 8) {
      await Promise.all(
        Array.from({ length: Math.min(8, to - i) }, async (_, k) => {
          const res = await t.app.inject({
            method: "POST",
            url: "/graphql",
            headers,
            payload: JSON.stringify({
              query: `{ CUST(source: "anag-1", where: {NAME: {_eq: "none${i + k}"}}, limit: 1) { data { CUST_ID NAME } } }`,
            }),
          });
          expect(res.statusCode).toBe(200);
          expect(res.json().errors).toBeUndefined();
        }),
      );
    }
  }

  it("keeps no more heap than GRAPHQL_DOCUMENT_CACHE_BYTES, however many distinct documents come", async () => {
    // Documents enough to fill the cache (31 tokens each, weighed about 12.6 KB: some 170 fill it)
    // and to warm the service's own first-request state, first: from then on it keeps no more.
    await sendDistinct(0, 1000);
    const before = liveHeap();
    // 2,000 more: weighed at ten times their text (about 1.1 KB), the cache took in 1,900 documents
    // before it evicted one, 15.7 MB of heap grown here; weighed by their tokens, nothing more.
    await sendDistinct(1000, 3000);
    const grown = liveHeap() - before;
    expect(grown).toBeLessThan(CACHE_BYTES);
  }, 120_000);
});
