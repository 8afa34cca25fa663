// The typed example client (examples/client.ts) against a server that runs only the manifest's
// documents (GRAPHQL_TRUSTED_DOCUMENTS=examples/gql/persisted-documents.json, GRAPHQL_TRUSTED_ONLY):
// it sends each document by the hash the client preset embeds (`documentId`), so it runs there,
// where its printed text would be refused. (Against a server without the manifest it falls back to
// the text: test/graphql/schema.test.ts, "the typed example client".)
import path from "node:path";
import { print } from "graphql";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { example } from "../../examples/client.ts";
import { CustomersOfCityDocument } from "../../examples/gql/graphql.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

describe("the typed example client on a trusted-only server", () => {
  let t: TestApp;
  let endpoint: string;
  beforeAll(async () => {
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: {
        ...NO_RATE_LIMITS,
        GRAPHQL_TRUSTED_DOCUMENTS: path.resolve("examples/gql/persisted-documents.json"),
        GRAPHQL_TRUSTED_ONLY: "true",
      },
    });
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    const address = t.app.server.address();
    if (!address || typeof address === "string") throw new Error("no port");
    endpoint = `http://127.0.0.1:${address.port}/graphql`;
  });
  afterAll(async () => {
    await t?.close();
  });

  it("lists and creates by the documents' hashes", async () => {
    const token = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    // The printed text is not the manifest's: sent as text, it is refused here.
    const asText = await fetch(endpoint, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: print(CustomersOfCityDocument), variables: { city: "MI" } }),
    });
    expect(asText.status).toBe(400);
    expect(
      ((await asText.json()) as { errors: Array<{ extensions: { code: string } }> }).errors[0]!.extensions
        .code,
    ).toBe("PERSISTED_QUERY_ONLY");
    const lines = await example(endpoint, token);
    expect(lines).toContain("Neri Trasporti (Milano)");
    expect(lines.at(-1)).toMatch(/^created \d+$/);
  });
});
