// One GraphQL schema per metadata version. The registry reloads the model on own metadata writes
// and on NOTIFY from other processes, and tells this cache, which builds the new schema in the
// background (requests keep the old one meanwhile); a request that still finds a stale version
// builds it itself. Requests that started on the old schema finish on it (they hold their own
// reference).
import type { GraphQLSchema } from "graphql";
import type { MetadataModel } from "../types.ts";
import { buildGraphQLSchema, type SchemaResolvers } from "./build.ts";

export interface SchemaCache {
  current(): GraphQLSchema;
  /** The metadata version of the schema held (null before the first build). */
  version(): number | null;
  /** Stops following metadata changes. */
  close(): void;
}

export function createSchemaCache<C>(
  metadata: { current(): MetadataModel; onChange?(listener: (model: MetadataModel) => void): () => void },
  resolvers: SchemaResolvers<C>,
): SchemaCache {
  let built: { version: number; schema: GraphQLSchema } | null = null;
  const build = (model: MetadataModel) => {
    if (built?.version !== model.version)
      built = { version: model.version, schema: buildGraphQLSchema(model, resolvers) };
    return built.schema;
  };
  const stop = metadata.onChange?.((model) => {
    setImmediate(() => {
      // Only if no newer model arrived meanwhile.
      if (metadata.current().version === model.version) build(model);
    });
  });
  return {
    current: () => build(metadata.current()),
    version: () => built?.version ?? null,
    close: () => stop?.(),
  };
}
