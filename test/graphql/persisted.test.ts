// Persisted operations (src/graphql/persisted.ts; spec decisions.md section 21): automatic
// persisted queries (hash alone, hash and document to register), their per-tenant bounds, trusted
// documents (GRAPHQL_TRUSTED_DOCUMENTS / GRAPHQL_TRUSTED_ONLY, the manifest `npm run codegen`
// writes), each over every HTTP transport — the plain POST, yoga (POST with a URL query) and GET —
// with the same answer (status, body) every way, and over WebSocket (graphql-transport-ws, the
// graphql-ws client) with the same body.
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { documentHash } from "../../src/graphql/persisted.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { graphqlSocket, webSocketUrl } from "./ws.ts";

const TRANSPORTS = ["plain", "yoga", "get"] as const;
type Transport = (typeof TRANSPORTS)[number];

interface Answer {
  status: number;
  type: string | undefined;
  body: string;
}

/** A persisted-operation request over one transport. */
async function send(
  t: TestApp,
  token: string,
  via: Transport,
  request: { query?: string; hash?: string; variables?: Record<string, unknown> },
): Promise<Answer> {
  const extensions =
    request.hash === undefined ? undefined : { persistedQuery: { version: 1, sha256Hash: request.hash } };
  if (via === "get") {
    const params = new URLSearchParams();
    if (request.query !== undefined) params.set("query", request.query);
    if (extensions) params.set("extensions", JSON.stringify(extensions));
    if (request.variables) params.set("variables", JSON.stringify(request.variables));
    const res = await t.app.inject({
      method: "GET",
      url: `/graphql?${params}`,
      headers: { ...bearer(token), accept: "application/json" },
    });
    return {
      status: res.statusCode,
      type: res.headers["content-type"] as string | undefined,
      body: res.body,
    };
  }
  const res = await t.app.inject({
    method: "POST",
    url: via === "plain" ? "/graphql" : "/graphql?via=yoga",
    headers: { ...bearer(token), "content-type": "application/json", accept: "application/json" },
    payload: { query: request.query, variables: request.variables, extensions },
  });
  return { status: res.statusCode, type: res.headers["content-type"] as string | undefined, body: res.body };
}

/**
 * The request over WebSocket: the answer's body (graphql-ws requires a `query` string: a hash
 * alone is sent with `query: ""`).
 */
async function overWebSocket(
  t: TestApp,
  token: string,
  request: { query?: string; hash?: string; variables?: Record<string, unknown> },
): Promise<string> {
  const socket = graphqlSocket(await webSocketUrl(t.app), token);
  try {
    return await socket.body({
      query: request.query ?? "",
      variables: request.variables,
      extensions:
        request.hash === undefined ? undefined : { persistedQuery: { version: 1, sha256Hash: request.hash } },
    });
  } finally {
    await socket.dispose();
  }
}

/**
 * The same request over every transport: their answers (status, content type, body), which must be
 * one; over WebSocket, the same body.
 */
async function everyWay(
  t: TestApp,
  token: string,
  request: { query?: string; hash?: string; variables?: Record<string, unknown> },
): Promise<Answer> {
  const answers = [];
  for (const via of TRANSPORTS) answers.push(await send(t, token, via, request));
  expect(answers[1]).toEqual(answers[0]);
  expect(answers[2]).toEqual(answers[0]);
  expect(await overWebSocket(t, token, request)).toBe(answers[0]!.body);
  return answers[0]!;
}

function codeOf(answer: Answer): string | undefined {
  return JSON.parse(answer.body).errors?.[0]?.extensions?.code;
}

const customers = (tag: string, limit = 2) =>
  `# ${tag}\n{ CUST(source: "anag-1", limit: ${limit}, order_by: [{CUST_ID: asc}]) { data { CUST_ID NAME } } }`;

async function documentsParsed(t: TestApp): Promise<number> {
  const metric = await t.services.metrics.graphqlDocumentsParsed.get();
  return metric.values.reduce((sum, v) => sum + v.value, 0);
}

describe("automatic persisted queries", () => {
  let t: TestApp;
  let anna: string;
  let greta: string;

  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        GRAPHQL_PERSISTED_MAX_PER_TENANT: "3",
        GRAPHQL_PERSISTED_MAX_BYTES_PER_TENANT: "400",
        GRAPHQL_MAX_ALIASES: "3",
      },
    });
    anna = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    greta = await loginAs(t.app, "greta", SAMPLE_USERS.greta.password);
  });
  afterAll(async () => {
    await t?.close();
  });

  it.each(TRANSPORTS)(
    "over %s: hash alone is NOT_FOUND, hash and document answer and register, then hash alone answers the same, unparsed",
    async (via) => {
      const query = customers(`apq over ${via}`);
      const hash = documentHash(query);
      const missing = await send(t, anna, via, { hash });
      expect(missing.status).toBe(404);
      expect(JSON.parse(missing.body)).toEqual({
        errors: [
          {
            message: "PersistedQueryNotFound",
            extensions: { code: "PERSISTED_QUERY_NOT_FOUND", status: 404 },
          },
        ],
      });

      const parsedBefore = await documentsParsed(t);
      const registered = await send(t, anna, via, { hash, query });
      expect(registered.status).toBe(200);
      const data = JSON.parse(registered.body);
      expect(data.errors).toBeUndefined();
      expect(data.data.CUST.data).toHaveLength(2);
      expect(await documentsParsed(t)).toBe(parsedBefore + 1);

      const again = await send(t, anna, via, { hash });
      expect(again).toEqual(registered);
      // The second run's document came from the chain's cache: not parsed (nor validated) again.
      expect(await documentsParsed(t)).toBe(parsedBefore + 1);
      // An empty text beside the hash is the hash alone, as over the WebSocket (graphql-ws needs
      // a query string): not a hash mismatch.
      expect(await send(t, anna, via, { hash, query: "" })).toEqual(registered);
      // The same answer as the document sent plainly, without extensions.
      expect(await send(t, anna, via, { query })).toEqual(registered);
    },
  );

  it("over WebSocket: hash alone is NOT_FOUND (an error message), hash and document register, then hash alone answers", async () => {
    const query = customers("apq over a socket");
    const persistedQuery = { version: 1, sha256Hash: documentHash(query) };
    const socket = graphqlSocket(await webSocketUrl(t.app), anna);
    try {
      expect(await socket.run({ query: "", extensions: { persistedQuery } })).toEqual({
        results: [],
        errors: [
          {
            message: "PersistedQueryNotFound",
            extensions: { code: "PERSISTED_QUERY_NOT_FOUND", status: 404 },
          },
        ],
      });
      const registered = await socket.run({ query, extensions: { persistedQuery } });
      expect(registered.errors).toBeNull();
      expect(registered.results).toHaveLength(1);
      expect((registered.results[0]!.data as { CUST: { data: unknown[] } }).CUST.data).toHaveLength(2);
      const parsedBefore = await documentsParsed(t);
      expect(await socket.run({ query: "", extensions: { persistedQuery } })).toEqual(registered);
      expect(await documentsParsed(t)).toBe(parsedBefore);
      // Registered over the socket, known over HTTP.
      expect(JSON.parse((await send(t, anna, "plain", { hash: persistedQuery.sha256Hash })).body)).toEqual(
        registered.results[0],
      );
    } finally {
      await socket.dispose();
    }
  });

  it("answers the same on every transport: registration, a hash run, a refusal", async () => {
    const query = customers("every way", 1);
    const hash = documentHash(query);
    expect(codeOf(await everyWay(t, anna, { hash }))).toBe("PERSISTED_QUERY_NOT_FOUND");
    const registered = await everyWay(t, anna, { hash, query });
    expect(registered.status).toBe(200);
    expect(await everyWay(t, anna, { hash })).toEqual(registered);
    // The "sha256:" prefix of the client preset's hashes is taken too.
    expect(await everyWay(t, anna, { hash: `sha256:${hash}` })).toEqual(registered);
  });

  it("refuses a hash that is not its document's, and registers nothing", async () => {
    const query = customers("mismatch");
    const other = documentHash(`${query} `);
    const refused = await everyWay(t, anna, { hash: other, query });
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toEqual({
      errors: [
        {
          message: "The persisted query's sha256Hash is not the SHA-256 (hex) of its document.",
          extensions: { code: "PERSISTED_QUERY_HASH_MISMATCH", status: 400 },
        },
      ],
    });
    expect(codeOf(await everyWay(t, anna, { hash: other }))).toBe("PERSISTED_QUERY_NOT_FOUND");
  });

  it("refuses a malformed persistedQuery with 400", async () => {
    const refused = await everyWay(t, anna, { hash: "not-a-hash", query: customers("bad") });
    expect(refused.status).toBe(400);
    expect(codeOf(refused)).toBe("PERSISTED_QUERY_INVALID");
  });

  it("runs a persisted operation through the chain's rules (too many aliases: refused alike, not registered)", async () => {
    const aliased = `{ ${["a", "b", "c", "d"].map((alias) => `${alias}: CUST(source: "anag-1", limit: 1) { data { CUST_ID } }`).join(" ")} }`;
    const plain = await everyWay(t, anna, { query: aliased });
    expect(codeOf(plain)).toBe("QUERY_TOO_COMPLEX");
    expect(await everyWay(t, anna, { query: aliased, hash: documentHash(aliased) })).toEqual(plain);
    // Refused when validated: not registered, so its hash alone is unknown (not that refusal again).
    const alone = await everyWay(t, anna, { hash: documentHash(aliased) });
    expect(alone.status).toBe(404);
    expect(codeOf(alone)).toBe("PERSISTED_QUERY_NOT_FOUND");
  });

  it.each([
    ["does not parse", `# unparsed\n{ CUST(source: "anag-1" { data { CUST_ID } } }`, "GRAPHQL_PARSE_FAILED"],
    [
      "does not validate",
      `# invalid\n{ CUST(source: "anag-1") { data { NO_SUCH_FIELD } } }`,
      "GRAPHQL_VALIDATION_FAILED",
    ],
    [
      "has no operation",
      `# fragment only\nfragment F on Query { __typename }`,
      "OPERATION_RESOLUTION_FAILURE",
    ],
  ])(
    "does not register a document that %s: refused with its error on every transport, then its hash alone is NOT_FOUND",
    async (_name, query, code) => {
      const hash = documentHash(query);
      const refused = await everyWay(t, anna, { hash, query });
      expect(JSON.parse(refused.body).errors[0].extensions).toMatchObject({ code, status: 400 });
      // The same refusal as the document sent without its hash, and again with it (nothing kept).
      expect(await everyWay(t, anna, { query })).toEqual(refused);
      expect(await everyWay(t, anna, { hash, query })).toEqual(refused);
      const alone = await everyWay(t, anna, { hash });
      expect(alone.status).toBe(404);
      expect(JSON.parse(alone.body)).toEqual({
        errors: [
          {
            message: "PersistedQueryNotFound",
            extensions: { code: "PERSISTED_QUERY_NOT_FOUND", status: 404 },
          },
        ],
      });
      // A valid document of the same request registers as before.
      const valid = customers(`valid after ${code}`);
      expect((await send(t, anna, "plain", { hash: documentHash(valid), query: valid })).status).toBe(200);
      expect((await everyWay(t, anna, { hash: documentHash(valid) })).status).toBe(200);
    },
  );

  it("bounds a tenant's registrations in count, another tenant unaffected", async () => {
    const gretaQuery = `# greta's\n{ __typename }`;
    const gretaHash = documentHash(gretaQuery);
    expect((await send(t, greta, "plain", { hash: gretaHash, query: gretaQuery })).status).toBe(200);
    // Count: at most 3 per tenant, the least recently used going first.
    const texts = ["c1", "c2", "c3", "c4"].map((tag) => `# ${tag}\n{ __typename }`);
    for (const query of texts)
      expect((await send(t, anna, "plain", { hash: documentHash(query), query })).status).toBe(200);
    expect(codeOf(await everyWay(t, anna, { hash: documentHash(texts[0]!) }))).toBe(
      "PERSISTED_QUERY_NOT_FOUND",
    );
    for (const query of texts.slice(1))
      expect((await everyWay(t, anna, { hash: documentHash(query) })).status).toBe(200);
    // Another tenant's registration is its own: still there.
    expect(JSON.parse((await everyWay(t, greta, { hash: gretaHash })).body)).toEqual({
      data: { __typename: "Query" },
    });
    // A tenant's registration is not another's.
    expect(codeOf(await send(t, greta, "plain", { hash: documentHash(texts[3]!) }))).toBe(
      "PERSISTED_QUERY_NOT_FOUND",
    );
  });

  it("bounds a tenant's registrations in bytes: older ones go, a larger document runs but is not kept", async () => {
    const gretaQuery = `# greta's bytes\n{ __typename }`;
    await send(t, greta, "plain", { hash: documentHash(gretaQuery), query: gretaQuery });
    const small = `# small\n{ __typename }`;
    await send(t, anna, "plain", { hash: documentHash(small), query: small });
    // 400 bytes per tenant: a 390-byte document leaves no room for the small one.
    const large = `# ${"x".repeat(390 - 17)}\n{ __typename }`;
    expect(Buffer.byteLength(large)).toBe(390);
    expect((await send(t, anna, "plain", { hash: documentHash(large), query: large })).status).toBe(200);
    expect((await everyWay(t, anna, { hash: documentHash(large) })).status).toBe(200);
    expect(codeOf(await everyWay(t, anna, { hash: documentHash(small) }))).toBe("PERSISTED_QUERY_NOT_FOUND");
    // Over the tenant's bytes: run, not kept.
    const huge = `# ${"y".repeat(500)}\n{ __typename }`;
    expect((await everyWay(t, anna, { hash: documentHash(huge), query: huge })).status).toBe(200);
    expect(codeOf(await everyWay(t, anna, { hash: documentHash(huge) }))).toBe("PERSISTED_QUERY_NOT_FOUND");
    expect((await everyWay(t, greta, { hash: documentHash(gretaQuery) })).status).toBe(200);
  });
});

describe("a document over GRAPHQL_MAX_DOCUMENT_BYTES sent with its hash", () => {
  it("is refused (413) and not registered: its hash alone is then NOT_FOUND, not that 413 again", async () => {
    const t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, GRAPHQL_MAX_DOCUMENT_BYTES: "1024" },
    });
    try {
      const anna = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
      const long = `# ${"z".repeat(1500)}\n{ __typename }`;
      const hash = documentHash(long);
      const refused = await send(t, anna, "plain", { hash, query: long });
      expect(refused.status).toBe(413);
      expect(codeOf(refused)).toBe("DOCUMENT_TOO_LARGE");
      const alone = await everyWay(t, anna, { hash });
      expect(alone.status).toBe(404);
      expect(codeOf(alone)).toBe("PERSISTED_QUERY_NOT_FOUND");
    } finally {
      await t.close();
    }
  });
});

describe("trusted documents", () => {
  const trustedQuery = `query Trusted { CUST(source: "anag-1", limit: 2, order_by: [{CUST_ID: asc}]) { data { CUST_ID } } }`;
  const trustedHash = documentHash(trustedQuery);
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(path.join(tmpdir(), "dimensio-trusted-"));
    writeFileSync(
      path.join(dir, "manifest.json"),
      JSON.stringify({ [`sha256:${trustedHash}`]: trustedQuery }),
    );
    writeFileSync(
      path.join(dir, "wrong-hash.json"),
      JSON.stringify({ [documentHash("{ x }")]: trustedQuery }),
    );
    writeFileSync(path.join(dir, "not-json.json"), "{");
    writeFileSync(path.join(dir, "array.json"), "[]");
  });

  describe("GRAPHQL_TRUSTED_ONLY=true", () => {
    let t: TestApp;
    let anna: string;
    beforeAll(async () => {
      t = await createTestApp("pglite", {
        fixture: "sample",
        env: {
          ...NO_RATE_LIMITS,
          GRAPHQL_TRUSTED_DOCUMENTS: path.join(dir, "manifest.json"),
          GRAPHQL_TRUSTED_ONLY: "true",
        },
      });
      anna = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    });
    afterAll(async () => {
      await t?.close();
    });

    it("runs a manifest document by its hash, and as its text, on every transport", async () => {
      const byHash = await everyWay(t, anna, { hash: trustedHash });
      expect(byHash.status).toBe(200);
      expect(JSON.parse(byHash.body).data.CUST.data).toHaveLength(2);
      expect(await everyWay(t, anna, { hash: trustedHash, query: trustedQuery })).toEqual(byHash);
      expect(await everyWay(t, anna, { query: trustedQuery })).toEqual(byHash);
    });

    it("refuses any other document with 400 PERSISTED_QUERY_ONLY on every transport, and registers nothing", async () => {
      const other = `{ CUST(source: "anag-1", limit: 1) { data { CUST_ID } } }`;
      for (const request of [
        { query: other },
        { query: other, hash: documentHash(other) },
        { hash: documentHash(other) },
      ]) {
        const refused = await everyWay(t, anna, request);
        expect(refused.status).toBe(400);
        expect(codeOf(refused)).toBe("PERSISTED_QUERY_ONLY");
      }
    });
  });

  it("without GRAPHQL_TRUSTED_ONLY, the manifest's documents are known to every tenant and others still register", async () => {
    const t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, GRAPHQL_TRUSTED_DOCUMENTS: path.join(dir, "manifest.json") },
    });
    try {
      const greta = await loginAs(t.app, "greta", SAMPLE_USERS.greta.password);
      expect((await everyWay(t, greta, { hash: trustedHash })).status).toBe(200);
      const other = `# other\n{ __typename }`;
      expect(codeOf(await everyWay(t, greta, { hash: documentHash(other) }))).toBe(
        "PERSISTED_QUERY_NOT_FOUND",
      );
      expect((await everyWay(t, greta, { hash: documentHash(other), query: other })).status).toBe(200);
    } finally {
      await t.close();
    }
  });

  it("accepts the manifest `npm run codegen` writes (examples/gql/persisted-documents.json) and runs its documents by hash", async () => {
    const file = path.resolve("examples/gql/persisted-documents.json");
    const manifest = JSON.parse(readFileSync(file, "utf8")) as Record<string, string>;
    const [hash] = Object.entries(manifest).find(([, document]) =>
      document.startsWith("query CustomersOfCity"),
    )!;
    const t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, GRAPHQL_TRUSTED_DOCUMENTS: file, GRAPHQL_TRUSTED_ONLY: "true" },
    });
    try {
      const anna = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
      const answer = await everyWay(t, anna, { hash, variables: { city: "no-such-city", limit: 2 } });
      expect(answer.status).toBe(200);
      expect(JSON.parse(answer.body)).toEqual({
        data: { CUST: { data: [], meta: { has_more: false, total: 0 } } },
      });
      // The bare hex (as APQ clients send it) names it too.
      expect(
        await everyWay(t, anna, {
          hash: hash.replace(/^sha256:/, ""),
          variables: { city: "no-such-city", limit: 2 },
        }),
      ).toEqual(answer);
    } finally {
      await t.close();
    }
  });

  it.each([
    ["a missing file", "missing.json", /cannot read/],
    ["a file that is not JSON", "not-json.json", /is not JSON/],
    ["a file that is not an object", "array.json", /must be a JSON object/],
    ["a hash that is not its document's", "wrong-hash.json", /is not the SHA-256 of its document/],
  ])("stops start-up naming GRAPHQL_TRUSTED_DOCUMENTS for %s", (_name, file, reason) => {
    let error: unknown;
    try {
      loadConfig({ GRAPHQL_TRUSTED_DOCUMENTS: path.join(dir, file) });
    } catch (err) {
      error = err;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).message).toMatch(/GRAPHQL_TRUSTED_DOCUMENTS: /);
    expect((error as ConfigError).message).toMatch(reason);
  });

  it("refuses GRAPHQL_TRUSTED_ONLY=true without GRAPHQL_TRUSTED_DOCUMENTS", () => {
    expect(() => loadConfig({ GRAPHQL_TRUSTED_ONLY: "true" })).toThrow(
      /GRAPHQL_TRUSTED_DOCUMENTS: required when GRAPHQL_TRUSTED_ONLY=true/,
    );
  });
});
