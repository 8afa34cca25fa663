/* eslint-disable */
/** Internal type. DO NOT USE DIRECTLY. */
type Exact<T extends { [key: string]: unknown }> = { [K in keyof T]: T[K] };
/** Internal type. DO NOT USE DIRECTLY. */
export type Incremental<T> = T | { [P in keyof T]?: P extends ' $fragmentName' | '__typename' ? T[P] : never };
import type { TypedDocumentNode as DocumentNode } from '@graphql-typed-document-node/core';
export type Cust_Create_Input = {
  CITY_ID?: string | null | undefined;
  CODE?: string | null | undefined;
  CREDIT_LIMIT?: number | null | undefined;
  CUST_ID?: number | null | undefined;
  EMAIL?: string | null | undefined;
  INTERNAL?: string | null | undefined;
  NAME?: string | null | undefined;
  NOTES?: string | null | undefined;
  RISK_SCORE?: number | null | undefined;
  SALES_REP?: string | null | undefined;
  VIP?: boolean | null | undefined;
};

export type CustomersOfCityQueryVariables = Exact<{
  city: string;
  limit?: number | null | undefined;
}>;


export type CustomersOfCityQuery = { CUST: { data: Array<{ CUST_ID: number | null, NAME: string | null, CREDIT_LIMIT: number | null, CITY: { NAME: string | null } | null }>, meta: { total: number | null, has_more: boolean } } };

export type CreateCustomerMutationVariables = Exact<{
  data: Cust_Create_Input;
}>;


export type CreateCustomerMutation = { CUST_create: { event_id: string | null, data: { CUST_ID: number | null, NAME: string | null } | null } };


export const CustomersOfCityDocument = {"__meta__":{"hash":"sha256:5f836cd3a0bb66e806d8835e12b3ae51d553635d3a9eb5f1913344ac0401427e"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"query","name":{"kind":"Name","value":"CustomersOfCity"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"city"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"String"}}}},{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"limit"}},"type":{"kind":"NamedType","name":{"kind":"Name","value":"Int"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"CUST"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"source"},"value":{"kind":"StringValue","value":"anag-1","block":false}},{"kind":"Argument","name":{"kind":"Name","value":"where"},"value":{"kind":"ObjectValue","fields":[{"kind":"ObjectField","name":{"kind":"Name","value":"CITY_ID"},"value":{"kind":"ObjectValue","fields":[{"kind":"ObjectField","name":{"kind":"Name","value":"_eq"},"value":{"kind":"Variable","name":{"kind":"Name","value":"city"}}}]}}]}},{"kind":"Argument","name":{"kind":"Name","value":"order_by"},"value":{"kind":"ListValue","values":[{"kind":"ObjectValue","fields":[{"kind":"ObjectField","name":{"kind":"Name","value":"NAME"},"value":{"kind":"EnumValue","value":"asc"}}]}]}},{"kind":"Argument","name":{"kind":"Name","value":"limit"},"value":{"kind":"Variable","name":{"kind":"Name","value":"limit"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"data"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"CUST_ID"}},{"kind":"Field","name":{"kind":"Name","value":"NAME"}},{"kind":"Field","name":{"kind":"Name","value":"CREDIT_LIMIT"}},{"kind":"Field","name":{"kind":"Name","value":"CITY"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"NAME"}}]}}]}},{"kind":"Field","name":{"kind":"Name","value":"meta"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"total"}},{"kind":"Field","name":{"kind":"Name","value":"has_more"}}]}}]}}]}}]} as unknown as DocumentNode<CustomersOfCityQuery, CustomersOfCityQueryVariables>;
export const CreateCustomerDocument = {"__meta__":{"hash":"sha256:3f41605eff32853a6a1019d43ab6c9252c8043a59b20f08b08879133d10665b6"},"kind":"Document","definitions":[{"kind":"OperationDefinition","operation":"mutation","name":{"kind":"Name","value":"CreateCustomer"},"variableDefinitions":[{"kind":"VariableDefinition","variable":{"kind":"Variable","name":{"kind":"Name","value":"data"}},"type":{"kind":"NonNullType","type":{"kind":"NamedType","name":{"kind":"Name","value":"CUST_create_input"}}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"CUST_create"},"arguments":[{"kind":"Argument","name":{"kind":"Name","value":"source"},"value":{"kind":"StringValue","value":"anag-1","block":false}},{"kind":"Argument","name":{"kind":"Name","value":"data"},"value":{"kind":"Variable","name":{"kind":"Name","value":"data"}}}],"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"data"},"selectionSet":{"kind":"SelectionSet","selections":[{"kind":"Field","name":{"kind":"Name","value":"CUST_ID"}},{"kind":"Field","name":{"kind":"Name","value":"NAME"}}]}},{"kind":"Field","name":{"kind":"Name","value":"event_id"}}]}}]}}]} as unknown as DocumentNode<CreateCustomerMutation, CreateCustomerMutationVariables>;