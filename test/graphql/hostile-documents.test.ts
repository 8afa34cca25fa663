// Issue 35 §1–§3: nothing in a GraphQL request becomes code, no document text is kept by the
// service, and a document too large is refused before it is read. graphql-jit (dropped) wrote a
// field's literal arguments into the JavaScript it generated and turned any string starting with
// its `__MAGIC_DATE__<uuid>` marker into `new Date(<rest>)`, unescaped: a String literal was code.
// Every marker and every character a code generator special-cases is sent here in literals,
// variables, aliases, operation names, directives and fragment arguments, on every transport (the
// plain POST, yoga's POST, GET and SSE); no code runs, and both transports give the same answer.
import { existsSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createDocumentCache, documentKey } from "../../src/graphql/document-cache.ts";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";
import { parse } from "graphql";

const MARKERS = [
  "__MAGIC_DATE__33a9e76d_02e0_4128_8e92_3530ad3da74d",
  "__MAGIC_NAN__57f286b9_4c20_487f_b409_79804ddcb4f8",
  "__MAGIC_PLUS_INFINITY__bb201c39_3333_4695_b4ad_7f1722e7aa7a",
  "__MAGIC_MINUS_INFINITY__71d4310a_d4a3_4a05_b1fe_e60779d24998",
];

describe("hostile GraphQL documents", () => {
  let t: TestApp;
  let dir: string;
  let pwned: string;
  let tokens: Record<string, string>;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(tmpdir(), "dimensio-hostile-"));
    pwned = path.join(dir, "pwned");
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
    tokens = {
      anna: await loginAs(t.app, "anna", SAMPLE_USERS.anna.password),
      lucia: await loginAs(t.app, "lucia", SAMPLE_USERS.lucia.password),
    };
  });
  afterAll(async () => {
    await t?.close();
    await rm(dir, { recursive: true, force: true });
  });

  /** A string that graphql-jit turned into code that writes `pwned`. */
  const payloads = () => [
    ...MARKERS.map(
      (m) => `${m}(process.getBuiltinModule('fs').writeFileSync(${JSON.stringify(pwned)}, 'x'))`,
    ),
    ...MARKERS,
    `"); process.getBuiltinModule('fs').writeFileSync(${JSON.stringify(pwned)}, 'x'); ("`,
    "`${process.getBuiltinModule('fs').writeFileSync(" + JSON.stringify(pwned) + ", 'x')}`",
    "*/ process.exit(1) /*",
    "\u2028\u2029\\u0000 \\\" '",
  ];
  const literal = (s: string) => JSON.stringify(s);

  async function post(user: string, body: Record<string, unknown>, url = "/graphql") {
    const res = await t.app.inject({
      method: "POST",
      url,
      headers: { ...bearer(tokens[user]!), "content-type": "application/json" },
      payload: body,
    });
    return { status: res.statusCode, type: res.headers["content-type"], body: res.body };
  }

  /** The plain POST's answer, checked equal to yoga's POST and GET (a query) answers. */
  async function everyTransport(user: string, body: Record<string, unknown>, isQuery = true) {
    const plain = await post(user, body);
    const yoga = await post(user, body, "/graphql?via=yoga");
    expect(plain).toEqual(yoga);
    if (isQuery) {
      const params = new URLSearchParams({ query: body.query as string });
      if (body.variables) params.set("variables", JSON.stringify(body.variables));
      if (body.operationName) params.set("operationName", body.operationName as string);
      const get = await t.app.inject({
        method: "GET",
        url: `/graphql?${params}`,
        headers: { ...bearer(tokens[user]!), accept: "application/json" },
      });
      expect({ status: get.statusCode, body: get.body }).toEqual({ status: plain.status, body: plain.body });
    }
    expect(existsSync(pwned), "a request ran code").toBe(false);
    return JSON.parse(plain.body);
  }

  it("markers and code in literals and variables are strings, on every transport", async () => {
    for (const s of payloads()) {
      // In a filter literal, a list literal and a variable: compared as the string it is.
      const byLiteral = await everyTransport("lucia", {
        query: `{ CUST(source: "anag-1", where: {NAME: {_eq: ${literal(s)}}}) { data { CUST_ID } } n: CUST_count(source: "anag-1", where: {NAME: {_in: [${literal(s)}, "x"]}}) }`,
      });
      expect(byLiteral).toEqual({ data: { CUST: { data: [] }, n: 0 } });
      const byVariable = await everyTransport("lucia", {
        query: `query ($s: String, $w: CUST_where) { CUST(source: "anag-1", where: {NAME: {_eq: $s}}) { data { CUST_ID } } n: CUST_count(source: "anag-1", where: $w) }`,
        variables: { s, w: { NAME: { _eq: s } } },
      });
      expect(byVariable).toEqual({ data: { CUST: { data: [] }, n: 0 } });
      // As the source argument: refused as an unknown security area, the same on both transports.
      const asSource = await everyTransport("lucia", { query: `{ CUST_count(source: ${literal(s)}) }` });
      expect(asSource.errors[0].extensions.code).toBeTypeOf("string");
    }
  });

  it("a marker written and read back is the same string (a create and a read)", async () => {
    for (const [i, s] of payloads().entries()) {
      const created = await everyTransport(
        "anna",
        {
          query: `mutation { CUST_create(source: "anag-1", data: {NAME: "Marker ${i}", NOTES: ${literal(s)}}) { data { NAME NOTES } } }`,
        },
        false,
      );
      // Both transports wrote a record: each answer carries the string as sent.
      expect(created.data.CUST_create.data.NOTES).toBe(s);
      const listed = await everyTransport("anna", {
        query: `query ($n: String) { CUST(source: "anag-1", where: {NAME: {_eq: $n}}) { data { CUST_ID } } }`,
        variables: { n: `Marker ${i}` },
      });
      expect(listed.data.CUST.data).toHaveLength(2);
      for (const { CUST_ID } of listed.data.CUST.data) {
        const read = await everyTransport("anna", {
          query: `query ($id: ID!) { CUST_by_id(source: "anag-1", id: $id) { NOTES } }`,
          variables: { id: String(CUST_ID) },
        });
        expect(read.data.CUST_by_id.NOTES).toBe(s);
      }
    }
  });

  it("markers as aliases, operation names, directive arguments and fragment arguments", async () => {
    for (const m of MARKERS) {
      const aliased = await everyTransport("lucia", {
        query: `query ${m} { ${m}: __typename n: CUST_count(source: "anag-1") @include(if: true) @skip(if: false) }`,
        operationName: m,
      });
      expect(aliased.data[m]).toBe("Query");
      // A directive the schema does not have, with a marker argument: refused by validation.
      const directive = await everyTransport("lucia", {
        query: `{ __typename @${m.toLowerCase()}(x: ${literal(`${m}(process.exit(1))`)}) }`,
      });
      expect(directive.errors[0].message).toContain("Unknown directive");
      // Fragment arguments are not GraphQL (graphql-js refuses them when parsing).
      const fragment = await everyTransport("lucia", {
        query: `{ ...F(x: ${literal(`${m}(process.exit(1))`)}) } fragment F($x: String) on Query { __typename }`,
      });
      expect(fragment.errors[0].message).toMatch(/Syntax Error/);
    }
  });

  it("a subscription with a marker argument over SSE runs no code", async () => {
    for (const s of payloads().slice(0, MARKERS.length)) {
      const res = await t.app.inject({
        method: "POST",
        url: "/graphql",
        headers: {
          ...bearer(tokens.lucia!),
          "content-type": "application/json",
          accept: "text/event-stream",
        },
        payload: { query: `subscription { CUST_events(source: ${literal(s)}) { event_id } }` },
      });
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain("event: next");
      expect(res.body).toContain('"code":');
      expect(existsSync(pwned)).toBe(false);
    }
  });

  it("a document over GRAPHQL_MAX_DOCUMENT_BYTES is refused with 413 before it is parsed", async () => {
    const max = t.services.config.graphql.maxDocumentBytes;
    const query = `{ __typename } # ${"x".repeat(max)}`;
    for (const url of ["/graphql", "/graphql?via=yoga"]) {
      const res = await post("lucia", { query }, url);
      expect(res.status).toBe(413);
      // What to do: data goes in variables.
      expect(JSON.parse(res.body).errors[0].message).toBe(
        `The GraphQL document is ${Buffer.byteLength(query)} bytes; at most ${max} are accepted. Pass values as variables.`,
      );
      expect(JSON.parse(res.body).errors[0].extensions).toEqual({
        code: "DOCUMENT_TOO_LARGE",
        status: 413,
        details: { max_document_bytes: max, document_bytes: Buffer.byteLength(query) },
      });
    }
    // Counted in bytes, not characters.
    const wide = `{ __typename } # ${"é".repeat(Math.ceil(max / 2))}`;
    expect((await post("lucia", { query: wide })).status).toBe(413);
    // Just under it: answered.
    const fits = `{ __typename } # ${"x".repeat(max - 40)}`;
    expect(JSON.parse((await post("lucia", { query: fits })).body)).toEqual({
      data: { __typename: "Query" },
    });
  });

  it("a body over GRAPHQL_MAX_BODY_BYTES is refused with 413 from its length, unread", async () => {
    const max = t.services.config.graphql.maxBodyBytes;
    const query = `{ __typename } # ${"x".repeat(max)}`;
    const res = await t.app.inject({
      method: "POST",
      url: "/graphql",
      headers: { ...bearer(tokens.lucia!), "content-type": "application/json" },
      payload: { query },
    });
    expect(res.statusCode).toBe(413);
    const [error] = JSON.parse(res.body).errors;
    expect(error.extensions).toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
      status: 413,
      details: { max_bytes: Math.min(max, t.services.config.bodyLimitBytes) },
    });
    expect(error.message).toBe(
      `The request body is over ${Math.min(max, t.services.config.bodyLimitBytes)} bytes, the most this route takes: send less or split a batch into smaller requests; for bulk data use POST /api/v4/core/{dim}/import (CSV or NDJSON).`,
    );
    // The connection closes after the answer: the client stops sending a body nobody reads.
    expect(res.headers.connection).toBe("close");
  });

  it("nonce documents with a recursive input variable are answered, each as any other", async () => {
    // graphql-jit compiled each distinct text for seconds (recursive *_where coercion).
    for (let i = 0; i < 20; i++) {
      const res = await post("lucia", {
        query: `query ($w: CUST_where) { CUST_count(source: "anag-1", where: $w) } # nonce ${i} ${Math.random()}`,
        variables: { w: { _or: [{ NAME: { _eq: "a" } }, { _and: [{ NAME: { _eq: "b" } }] }] } },
      });
      expect(res.status).toBe(200);
      expect(JSON.parse(res.body)).toEqual({ data: { CUST_count: 0 } });
    }
  });
});

describe("the document cache", () => {
  it("keys documents by the hash of their text and keeps at most its bytes", () => {
    const cache = createDocumentCache(1_000_000);
    const text = (i: number) => `{ __typename } # ${i} ${"c".repeat(30_000)}`;
    for (let i = 0; i < 200; i++) cache.set(text(i), parse(text(i)));
    const { entries, bytes } = cache.stats();
    expect(bytes).toBeLessThanOrEqual(1_000_000);
    expect(entries).toBeGreaterThan(0);
    // Each weighs at least its text's 2 bytes a character (30,000 of them, a comment's).
    expect(entries).toBeLessThanOrEqual(Math.floor(1_000_000 / (2 * 30_000)));
    expect(cache.get(text(199))?.kind).toBe("Document");
    expect(cache.get(text(0))).toBeUndefined();
    // The key is a number, never the text; seeded: another seed keys the same text elsewhere.
    expect(Number.isSafeInteger(documentKey(text(1), 1))).toBe(true);
    expect(documentKey(text(1), 1)).toBe(documentKey(text(1), 1));
    expect(documentKey(text(1), 2)).not.toBe(documentKey(text(1), 1));
    expect(documentKey(text(2), 1)).not.toBe(documentKey(text(1), 1));
  });

  it("answers a key's document only for its own text: texts that share a key cost a parse, never the other's document", () => {
    const cache = createDocumentCache(1_000_000, { keyOf: () => 7 });
    cache.set("{ mine }", parse("{ mine }"));
    expect(cache.get("{ mine }")?.loc?.source.body).toBe("{ mine }");
    expect(cache.get("{ theirs }")).toBeUndefined();
    cache.set("{ theirs }", parse("{ theirs }"));
    expect(cache.get("{ theirs }")?.loc?.source.body).toBe("{ theirs }");
    expect(cache.get("{ mine }")).toBeUndefined();
    // A document that is not the text's own (no source, or another's) is not kept for it.
    cache.set("{ other }", parse("{ mine }"));
    expect(cache.get("{ other }")).toBeUndefined();
    cache.set("{ bare }", parse("{ bare }", { noLocation: true }));
    expect(cache.get("{ bare }")).toBeUndefined();
    expect(cache.stats().entries).toBe(1);
  });

  it("keeps nothing when its size is 0", () => {
    const cache = createDocumentCache(0);
    cache.set("{ a }", parse("{ a }"));
    expect(cache.get("{ a }")).toBeUndefined();
    expect(cache.stats().entries).toBe(0);
  });
});
