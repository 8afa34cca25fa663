// A small typed client of the GraphQL API (the sample fixture's metadata): list customers of a
// city, create one. The documents are typed by GraphQL Code Generator (`npm run codegen`), so the
// variables and results below are checked by the compiler; `npm test` type-checks this file.
import type { TypedDocumentNode } from "@graphql-typed-document-node/core";
import { print } from "graphql";
import { graphql } from "./gql/index.js";

const CustomersOfCity = graphql(`
  query CustomersOfCity($city: String!, $limit: Int) {
    CUST(source: "anag-1", where: { CITY_ID: { _eq: $city } }, order_by: [{ NAME: asc }], limit: $limit) {
      data {
        CUST_ID
        NAME
        CREDIT_LIMIT
        CITY {
          NAME
        }
      }
      meta {
        total
        has_more
      }
    }
  }
`);

const CreateCustomer = graphql(`
  mutation CreateCustomer($data: CUST_create_input!) {
    CUST_create(source: "anag-1", data: $data) {
      data {
        CUST_ID
        NAME
      }
      event_id
    }
  }
`);

/** A GraphQL answer's body. */
interface Answer<R> {
  data?: R;
  errors?: Array<{ message: string; extensions?: { code?: string } }>;
}

async function post<R>(endpoint: string, token: string, body: Record<string, unknown>): Promise<Answer<R>> {
  const res = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return (await res.json()) as Answer<R>;
}

/**
 * POSTs a typed document with a bearer token; throws with the first error's code. The document goes
 * by its hash (`documentId`: the `__meta__.hash` the client preset embeds, the key of
 * gql/persisted-documents.json), so a server that runs only the manifest's documents
 * (GRAPHQL_TRUSTED_DOCUMENTS, GRAPHQL_TRUSTED_ONLY=true) runs it; `print(document)` is not the
 * manifest's text, so sent as text it would be refused there. A server without the manifest answers
 * PERSISTED_QUERY_NOT_FOUND: the document's text is sent then (a development server).
 */
export async function request<R, V>(
  endpoint: string,
  token: string,
  document: TypedDocumentNode<R, V>,
  variables: V,
): Promise<R> {
  const documentId = (document as { __meta__?: { hash?: string } }).__meta__?.hash;
  let body = documentId === undefined ? undefined : await post<R>(endpoint, token, { documentId, variables });
  if (!body || body.errors?.[0]?.extensions?.code === "PERSISTED_QUERY_NOT_FOUND")
    body = await post<R>(endpoint, token, { query: print(document), variables });
  if (body.errors?.length) {
    const [first] = body.errors;
    throw new Error(`${first?.extensions?.code ?? "ERROR"}: ${first?.message}`);
  }
  return body.data as R;
}

export async function example(endpoint: string, token: string): Promise<string[]> {
  const page = await request(endpoint, token, CustomersOfCity, { city: "MI", limit: 10 });
  const names = page.CUST.data.map((c) => `${c.NAME} (${c.CITY?.NAME ?? "?"})`);
  const created = await request(endpoint, token, CreateCustomer, {
    data: { NAME: "Typed Client Srl", CITY_ID: "MI" },
  });
  names.push(`created ${created.CUST_create.data?.CUST_ID}`);
  return names;
}
