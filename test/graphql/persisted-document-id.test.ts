// Persisted operations named by `documentId` (src/graphql/persisted.ts): the spelling of the
// GraphQL-over-HTTP persisted-documents proposal, graphql-yoga's persisted-operations plugin and the
// codegen client preset's docs (a body's or WebSocket payload's `documentId`, a GET's `documentId`
// parameter) names the same hash as `extensions.persistedQuery.sha256Hash`, with the same rules:
// unknown hash, hash with its document (registered), a hash that is not its document's, a
// malformed one, trusted-only mode; and both together must agree. Each over the plain POST, yoga
// (POST with a URL query), GET and WebSocket (the graphql-ws client), with one answer.
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { documentHash } from "../../src/graphql/persisted.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { graphqlSocket, type SocketPayload, webSocketUrl } from "./ws.ts";

interface Answer {
  status: number;
  body: string;
}

interface Request {
  query?: string;
  documentId?: unknown;
  hash?: string;
  variables?: Record<string, unknown>;
}

const persistedQuery = (hash: string | undefined) =>
  hash === undefined ? undefined : { persistedQuery: { version: 1, sha256Hash: hash } };

async function post(t: TestApp, token: string, url: string, request: Request): Promise<Answer> {
  const res = await t.app.inject({
    method: "POST",
    url,
    headers: { ...bearer(token), "content-type": "application/json", accept: "application/json" },
    payload: {
      query: request.query,
      documentId: request.documentId,
      variables: request.variables,
      extensions: persistedQuery(request.hash),
    },
  });
  return { status: res.statusCode, body: res.body };
}

async function get(t: TestApp, token: string, request: Request): Promise<Answer> {
  const params = new URLSearchParams();
  if (request.query !== undefined) params.set("query", request.query);
  if (request.documentId !== undefined) params.set("documentId", String(request.documentId));
  if (request.hash !== undefined) params.set("extensions", JSON.stringify(persistedQuery(request.hash)));
  if (request.variables) params.set("variables", JSON.stringify(request.variables));
  const res = await t.app.inject({
    method: "GET",
    url: `/graphql?${params}`,
    headers: { ...bearer(token), accept: "application/json" },
  });
  return { status: res.statusCode, body: res.body };
}

/** Over WebSocket: graphql-ws requires a `query` string, so a hash alone goes with `query: ""`. */
async function overWebSocket(t: TestApp, token: string, request: Request): Promise<string> {
  const socket = graphqlSocket(await webSocketUrl(t.app), token);
  try {
    const payload = {
      query: request.query ?? "",
      documentId: request.documentId,
      variables: request.variables,
      extensions: persistedQuery(request.hash),
    };
    return await socket.body(payload as SocketPayload);
  } finally {
    await socket.dispose();
  }
}

/** The request over the plain POST, yoga, GET and WebSocket: one answer (the socket's body the same). */
async function everyWay(t: TestApp, token: string, request: Request): Promise<Answer> {
  const plain = await post(t, token, "/graphql", request);
  expect(await post(t, token, "/graphql?via=yoga", request)).toEqual(plain);
  expect(await get(t, token, request)).toEqual(plain);
  expect(await overWebSocket(t, token, request)).toBe(plain.body);
  return plain;
}

function firstError(answer: Answer): { message: string; extensions: { code: string } } {
  return JSON.parse(answer.body).errors?.[0];
}

const customers = (tag: string) =>
  `# ${tag}\n{ CUST(source: "anag-1", limit: 2, order_by: [{CUST_ID: asc}]) { data { CUST_ID NAME } } }`;

describe("documentId without trusted documents (automatic persisted queries)", () => {
  let t: TestApp;
  let anna: string;

  beforeAll(async () => {
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    anna = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
  });
  afterAll(async () => {
    await t?.close();
  });

  it("an unknown documentId alone is 404 PERSISTED_QUERY_NOT_FOUND; with its document it runs and registers; then alone it runs, as the persistedQuery hash does", async () => {
    const query = customers("document id");
    const documentId = `sha256:${documentHash(query)}`;
    const missing = await everyWay(t, anna, { documentId });
    expect(missing.status).toBe(404);
    expect(firstError(missing).extensions.code).toBe("PERSISTED_QUERY_NOT_FOUND");

    const registered = await post(t, anna, "/graphql", { documentId, query });
    expect(registered.status).toBe(200);
    expect(JSON.parse(registered.body).data.CUST.data).toHaveLength(2);
    expect(await everyWay(t, anna, { documentId })).toEqual(registered);
    // The bare hex and the other spelling name the same registration.
    expect(await everyWay(t, anna, { documentId: documentHash(query) })).toEqual(registered);
    expect(await everyWay(t, anna, { hash: documentHash(query) })).toEqual(registered);
    // Both spellings of the one hash together: the same.
    expect(await everyWay(t, anna, { documentId, hash: documentHash(query) })).toEqual(registered);
    expect(await everyWay(t, anna, { documentId, query })).toEqual(registered);
  });

  it("a documentId that is not its document's SHA-256 is 400 PERSISTED_QUERY_HASH_MISMATCH, and registers nothing", async () => {
    const query = customers("mismatch");
    const forged = documentHash("{ __typename }");
    const refused = await everyWay(t, anna, { documentId: `sha256:${forged}`, query });
    expect(refused.status).toBe(400);
    expect(firstError(refused).extensions.code).toBe("PERSISTED_QUERY_HASH_MISMATCH");
    expect(firstError(await everyWay(t, anna, { documentId: forged })).extensions.code).toBe(
      "PERSISTED_QUERY_NOT_FOUND",
    );
  });

  it("documentId and a persistedQuery hash of another document are 400 PERSISTED_QUERY_INVALID", async () => {
    const query = customers("conflict");
    const other = customers("conflict, the other");
    await post(t, anna, "/graphql", { hash: documentHash(query), query });
    await post(t, anna, "/graphql", { hash: documentHash(other), query: other });
    const refused = await everyWay(t, anna, {
      documentId: `sha256:${documentHash(other)}`,
      hash: documentHash(query),
    });
    expect(refused.status).toBe(400);
    expect(JSON.parse(refused.body)).toEqual({
      errors: [
        {
          message:
            "documentId and extensions.persistedQuery.sha256Hash name different documents: send one of them.",
          extensions: { code: "PERSISTED_QUERY_INVALID", status: 400 },
        },
      ],
    });
  });

  it.each([
    ["not a SHA-256", "sha1:abc"],
    ["too short", `sha256:${"a".repeat(63)}`],
    ["another prefix", `md5:${"a".repeat(64)}`],
  ])("a documentId %s is 400 PERSISTED_QUERY_INVALID on every transport", async (_name, documentId) => {
    const refused = await everyWay(t, anna, { documentId });
    expect(refused.status).toBe(400);
    expect(firstError(refused)).toEqual({
      message:
        "documentId must be the SHA-256 of a document: sha256:<64 hex digits> (or the 64 hex digits alone).",
      extensions: { code: "PERSISTED_QUERY_INVALID", status: 400 },
    });
  });

  it("a documentId that is not a string (JSON body) is 400 PERSISTED_QUERY_INVALID, on the plain POST and yoga alike", async () => {
    const plain = await post(t, anna, "/graphql", { documentId: 42 });
    expect(plain.status).toBe(400);
    expect(firstError(plain).extensions.code).toBe("PERSISTED_QUERY_INVALID");
    expect(await post(t, anna, "/graphql?via=yoga", { documentId: 42 })).toEqual(plain);
  });

  it("a body or GET naming no document mentions documentId in its 400 BAD_REQUEST", async () => {
    const body = await post(t, anna, "/graphql", { documentId: null });
    expect(body.status).toBe(400);
    expect(firstError(body).message).toMatch(/a `documentId` or `extensions.persistedQuery`/);
    const res = await t.app.inject({
      method: "GET",
      url: "/graphql?documentId=",
      headers: { ...bearer(anna), accept: "application/json" },
    });
    expect(res.statusCode).toBe(400);
    expect(JSON.parse(res.body).errors[0].message).toMatch(/the `documentId` parameter/);
  });
});

describe("documentId with GRAPHQL_TRUSTED_ONLY=true", () => {
  const trustedQuery = `query Trusted($limit: Int) { CUST(source: "anag-1", limit: $limit, order_by: [{CUST_ID: asc}]) { data { CUST_ID } } }`;
  const trustedId = `sha256:${documentHash(trustedQuery)}`;
  let t: TestApp;
  let anna: string;

  beforeAll(async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "dimensio-document-id-"));
    writeFileSync(path.join(dir, "manifest.json"), JSON.stringify({ [trustedId]: trustedQuery }));
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

  it("runs a manifest document by its documentId (as the client preset's __meta__.hash gives it), with variables, on every transport", async () => {
    const answer = await everyWay(t, anna, { documentId: trustedId, variables: { limit: 1 } });
    expect(answer.status).toBe(200);
    expect(JSON.parse(answer.body).data.CUST.data).toHaveLength(1);
    expect(await everyWay(t, anna, { hash: documentHash(trustedQuery), variables: { limit: 1 } })).toEqual(
      answer,
    );
    expect(
      await everyWay(t, anna, { documentId: trustedId, query: trustedQuery, variables: { limit: 1 } }),
    ).toEqual(answer);
  });

  it("refuses any other documentId, alone or with its document, with 400 PERSISTED_QUERY_ONLY", async () => {
    const other = `{ CUST(source: "anag-1", limit: 1) { data { CUST_ID } } }`;
    for (const request of [
      { documentId: `sha256:${documentHash(other)}` },
      { documentId: `sha256:${documentHash(other)}`, query: other },
    ]) {
      const refused = await everyWay(t, anna, request);
      expect(refused.status).toBe(400);
      expect(firstError(refused).extensions.code).toBe("PERSISTED_QUERY_ONLY");
    }
  });
});
