// The SDL of the GraphQL schema for a fixture's metadata (npm run schema:print, the checked-in
// snapshot, GraphQL Code Generator's input): no database, the same builder the server uses.
import { lexicographicSortSchema, printSchema } from "graphql";
import { graphqlResolvers } from "../graphql/resolve.ts";
import { fixtureMetadata, fixtureSchema } from "../fixtures/schema.ts";
import { buildModel } from "../metadata/build.ts";
import { validateMetadata } from "../metadata/validate.ts";
import { buildGraphQLSchema } from "./build.ts";

export function printFixtureSchema(fixture: unknown): string {
  const rows = fixtureMetadata(fixtureSchema.parse(fixture));
  const problems = validateMetadata(rows);
  if (problems.length) {
    throw new Error(
      `The fixture's metadata is invalid:\n${problems.map((p) => `  ${p.path}: ${p.message}`).join("\n")}`,
    );
  }
  return printSchema(lexicographicSortSchema(buildGraphQLSchema(buildModel(rows, 1), graphqlResolvers())));
}
