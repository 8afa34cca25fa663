// The hostile GraphQL mix of issue 35 (§1–§3), as request makers for bench/isolation: documents
// made distinct by a nonce (each a new text: with graphql-jit each cost seconds of compile), long
// comments just under the document limit (each parsed once and kept by hash), 9.5 MB documents
// (refused before they are parsed) and graphql-jit's markers in literals (plain strings now).
// Every request is new text, so no cache of the service answers it from memory.
import { randomUUID } from "node:crypto";

export type RequestMaker = (token: string) => [string, RequestInit];

const MARKER = "__MAGIC_DATE__33a9e76d_02e0_4128_8e92_3530ad3da74d";

/** The hostile kinds, named "hostile GraphQL: …" (HEAVY_KINDS=hostile selects them). */
export function hostileGraphqlKinds(base: string, maxDocumentBytes = 65_536): Array<[string, RequestMaker]> {
  const post =
    (body: () => Record<string, unknown>): RequestMaker =>
    (token) => [
      `${base}/graphql`,
      {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body()),
      },
    ];
  const hugeBody = Buffer.from(JSON.stringify({ query: `{ __typename } # ${"x".repeat(9_500_000)}` }));
  const where = {
    _or: [{ NAME: { _eq: "a" } }, { _and: [{ CITY_ID: { _eq: "MI" } }, { VIP: { _eq: true } }] }],
  };
  return [
    [
      "hostile GraphQL: nonce document, recursive where variable",
      post(() => ({
        query: `query($w:CUST_where){ CUST_count(source:"anag-1", where:$w) } # ${randomUUID()}`,
        variables: { w: where },
      })),
    ],
    [
      "hostile GraphQL: comment just under the document limit",
      post(() => ({
        query: `{ CUST_count(source:"anag-1") } # ${randomUUID()} ${"c".repeat(maxDocumentBytes - 100)}`,
      })),
    ],
    [
      "hostile GraphQL: 9.5 MB document (refused)",
      // One body for every request (it is refused unread, so no nonce could matter): building a
      // 9.5 MB string per request would stall this process, the cheap GETs' prober included.
      (token) => [
        `${base}/graphql`,
        {
          method: "POST",
          headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
          body: hugeBody,
        },
      ],
    ],
    [
      "hostile GraphQL: marker strings in literals",
      post(() => ({
        query: `{ CUST(source: "anag-1", limit: 5, where: {NAME: {_eq: "${MARKER}(process.exit(1)) ${randomUUID()}"}}) { data { CUST_ID } } }`,
      })),
    ],
  ];
}
