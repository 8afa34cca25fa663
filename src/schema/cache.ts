// One GraphQL schema per metadata version. The registry reloads the model on own metadata writes
// and on NOTIFY from other processes; the next request after a version change builds the new
// schema once and every later one shares it, while requests that started on the old schema finish
// on it (they hold their own reference).
import type { GraphQLSchema } from "graphql";
import type { MetadataModel } from "../types.ts";
import { buildGraphQLSchema, type SchemaResolvers } from "./build.ts";

export interface SchemaCache {
  current(): GraphQLSchema;
}

export function createSchemaCache<C>(
  metadata: { current(): MetadataModel },
  resolvers: SchemaResolvers<C>,
): SchemaCache {
  let built: { version: number; schema: GraphQLSchema } | null = null;
  return {
    current() {
      const model = metadata.current();
      if (built?.version !== model.version) {
        built = { version: model.version, schema: buildGraphQLSchema(model, resolvers) };
      }
      return built.schema;
    },
  };
}
