// A GraphQL POST through the gateway to backends that are real processes (src/main.ts with a ROLE)
// on the real PostgreSQL and Redis: a query is answered by the read backend, a mutation by the
// write backend, a request the gateway cannot read with certainty (a batch) by write; a persisted
// query's hash alone reaches the read backend once its text went there, and runs there. Each
// backend's /metrics shows what reached it.
import { createHash } from "node:crypto";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginOverHttp, SAMPLE_USERS } from "../helpers/auth.ts";
import { TEST_DATABASE_URL, TEST_REDIS_URL } from "../helpers/env.ts";
import { printLogsOnFailure, type Role, startTopology, type Topology } from "../helpers/topology.ts";

const SETUPS = TEST_DATABASE_URL && TEST_REDIS_URL ? [{ redis: TEST_REDIS_URL }] : [];

describe.each(SETUPS)("GraphQL POSTs through the gateway to backend processes", ({ redis }) => {
  let topology: Topology;
  let headers: Record<string, string>;

  beforeAll(async () => {
    topology = await startTopology({
      roles: ["gateway", "read", "write", "auth"],
      env: { REDIS_URL: redis },
    });
    const token = await loginOverHttp(
      topology.url("gateway"),
      SAMPLE_USERS.anna.username,
      SAMPLE_USERS.anna.password,
    );
    headers = { authorization: `Bearer ${token}`, "content-type": "application/json" };
  }, 90_000);
  afterAll(async () => {
    await topology?.stop();
  });
  printLogsOnFailure(() => topology);

  /** How many POST /graphql requests reached `role` with `status`. */
  const graphqlPosts = async (role: Role, status: string) => {
    const res = await fetch(`${topology.url(role)}/metrics`, {
      headers: { "x-gateway-secret": topology.secret },
    });
    expect(res.status).toBe(200);
    const family = parsePrometheusTextFormat(await res.text()).find(
      (f) => f.name === "dimensio_http_requests_total",
    );
    return Number(
      family?.metrics.find(
        (m) => m.labels?.method === "POST" && m.labels?.route === "/graphql" && m.labels?.status === status,
      )?.value ?? 0,
    );
  };
  const post = async (body: unknown) => {
    const res = await fetch(`${topology.url("gateway")}/graphql`, {
      method: "POST",
      headers,
      body: JSON.stringify(body),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };
  const counts = async (status: string) => ({
    read: await graphqlPosts("read", status),
    write: await graphqlPosts("write", status),
  });

  it("a query is answered by the read backend, a mutation and a batch by the write backend", async () => {
    const before = { ok: await counts("200"), refused: await counts("400") };
    const query = await post({
      query: `query Two { CUST(source: "anag-1", limit: 2, order_by: [{CUST_ID: asc}]) { data { CUST_ID } } }`,
      operationName: "Two",
    });
    expect(query.status).toBe(200);
    expect(query.body).toMatchObject({ data: { CUST: { data: [{ CUST_ID: expect.anything() }, {}] } } });
    expect(await counts("200")).toEqual({ read: before.ok.read + 1, write: before.ok.write });

    const mutation = await post({
      query: `mutation { CUST_create(source: "anag-1", data: { NAME: "Through the gateway" }) { event_id } }`,
    });
    expect(mutation.status, JSON.stringify(mutation.body)).toBe(200);
    expect(mutation.body).not.toHaveProperty("errors");
    expect(await counts("200")).toEqual({ read: before.ok.read + 1, write: before.ok.write + 1 });

    // Batching is off on the backends: write answers it (400), as it did before the gateway read bodies.
    const batch = await fetch(`${topology.url("gateway")}/graphql`, {
      method: "POST",
      headers,
      body: JSON.stringify([{ query: "{ __typename }" }]),
    });
    expect(batch.status).toBe(400);
    expect(await counts("400")).toEqual({ read: before.refused.read, write: before.refused.write + 1 });
  });

  it("a persisted query: its hash alone goes to write until its text went to read, then to read, which runs it", async () => {
    const document = `query Persisted${Date.now()} { CUST(source: "anag-1", limit: 1) { data { CUST_ID } } }`;
    const extensions = {
      persistedQuery: { version: 1, sha256Hash: createHash("sha256").update(document).digest("hex") },
    };
    const before = { found: await counts("200"), missing: await counts("404") };
    const unknown = await post({ extensions });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ errors: [{ message: "PersistedQueryNotFound" }] });
    expect(await counts("404")).toEqual({ read: before.missing.read, write: before.missing.write + 1 });

    expect((await post({ query: document, extensions })).status).toBe(200);
    const known = await post({ extensions });
    expect(known.status).toBe(200);
    expect(known.body).toMatchObject({ data: { CUST: { data: [{ CUST_ID: expect.anything() }] } } });
    expect(await counts("200")).toEqual({ read: before.found.read + 2, write: before.found.write });
  });
});
