/* eslint-disable */
import * as types from './graphql.js';
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';

/**
 * Map of all GraphQL operations in the project.
 *
 * This map has several performance disadvantages:
 * 1. It is not tree-shakeable, so it will include all operations in the project.
 * 2. It is not minifiable, so the string of a GraphQL query will be multiple times inside the bundle.
 * 3. It does not support dead code elimination, so it will add unused operations.
 *
 * Therefore it is highly recommended to use the babel or swc plugin for production.
 * Learn more about it here: https://the-guild.dev/graphql/codegen/plugins/presets/preset-client#reducing-bundle-size
 */
type Documents = {
    "\n  query CustomersOfCity($city: String!, $limit: Int) {\n    CUST(source: \"anag-1\", where: { CITY_ID: { _eq: $city } }, order_by: [{ NAME: asc }], limit: $limit) {\n      data {\n        CUST_ID\n        NAME\n        CREDIT_LIMIT\n        CITY {\n          NAME\n        }\n      }\n      meta {\n        total\n        has_more\n      }\n    }\n  }\n": typeof types.CustomersOfCityDocument,
    "\n  mutation CreateCustomer($data: CUST_create_input!) {\n    CUST_create(source: \"anag-1\", data: $data) {\n      data {\n        CUST_ID\n        NAME\n      }\n      event_id\n    }\n  }\n": typeof types.CreateCustomerDocument,
};
const documents: Documents = {
    "\n  query CustomersOfCity($city: String!, $limit: Int) {\n    CUST(source: \"anag-1\", where: { CITY_ID: { _eq: $city } }, order_by: [{ NAME: asc }], limit: $limit) {\n      data {\n        CUST_ID\n        NAME\n        CREDIT_LIMIT\n        CITY {\n          NAME\n        }\n      }\n      meta {\n        total\n        has_more\n      }\n    }\n  }\n": types.CustomersOfCityDocument,
    "\n  mutation CreateCustomer($data: CUST_create_input!) {\n    CUST_create(source: \"anag-1\", data: $data) {\n      data {\n        CUST_ID\n        NAME\n      }\n      event_id\n    }\n  }\n": types.CreateCustomerDocument,
};

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 *
 *
 * @example
 * ```ts
 * const query = graphql(`query GetUser($id: ID!) { user(id: $id) { name } }`);
 * ```
 *
 * The query argument is unknown!
 * Please regenerate the types.
 */
export function graphql(source: string): unknown;

/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  query CustomersOfCity($city: String!, $limit: Int) {\n    CUST(source: \"anag-1\", where: { CITY_ID: { _eq: $city } }, order_by: [{ NAME: asc }], limit: $limit) {\n      data {\n        CUST_ID\n        NAME\n        CREDIT_LIMIT\n        CITY {\n          NAME\n        }\n      }\n      meta {\n        total\n        has_more\n      }\n    }\n  }\n"): (typeof documents)["\n  query CustomersOfCity($city: String!, $limit: Int) {\n    CUST(source: \"anag-1\", where: { CITY_ID: { _eq: $city } }, order_by: [{ NAME: asc }], limit: $limit) {\n      data {\n        CUST_ID\n        NAME\n        CREDIT_LIMIT\n        CITY {\n          NAME\n        }\n      }\n      meta {\n        total\n        has_more\n      }\n    }\n  }\n"];
/**
 * The graphql function is used to parse GraphQL queries into a document that can be used by GraphQL clients.
 */
export function graphql(source: "\n  mutation CreateCustomer($data: CUST_create_input!) {\n    CUST_create(source: \"anag-1\", data: $data) {\n      data {\n        CUST_ID\n        NAME\n      }\n      event_id\n    }\n  }\n"): (typeof documents)["\n  mutation CreateCustomer($data: CUST_create_input!) {\n    CUST_create(source: \"anag-1\", data: $data) {\n      data {\n        CUST_ID\n        NAME\n      }\n      event_id\n    }\n  }\n"];

export function graphql(source: string) {
  return (documents as any)[source] ?? {};
}

export type DocumentType<TDocumentNode extends DocumentNode<any, any>> = TDocumentNode extends DocumentNode<  infer TType,  any>  ? TType  : never;