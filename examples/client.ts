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

/** POSTs a typed document with a bearer token; throws with the first error's code. */
export async function request<R, V>(
  endpoint: string,
  token: string,
  document: TypedDocumentNode<R, V>,
  variables: V,
): Promise<R> {
  const res = await fetch(endpoint, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
    body: JSON.stringify({ query: print(document), variables }),
  });
  const body = (await res.json()) as { data?: R; errors?: Array<{ message: string; extensions?: { code?: string } }> };
  if (body.errors?.length) {
    const [first] = body.errors;
    throw new Error(`${first?.extensions?.code ?? "ERROR"}: ${first?.message}`);
  }
  return body.data as R;
}

export async function example(endpoint: string, token: string): Promise<string[]> {
  const page = await request(endpoint, token, CustomersOfCity, { city: "MI", limit: 10 });
  const names = page.CUST.data.map((c) => `${c.NAME} (${c.CITY?.NAME ?? "?"})`);
  const created = await request(endpoint, token, CreateCustomer, { data: { NAME: "Typed Client Srl", CITY_ID: "MI" } });
  names.push(`created ${created.CUST_create.data?.CUST_ID}`);
  return names;
}
