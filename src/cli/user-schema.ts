// The GraphQL schema one user is served (`npm run schema:print -- --user=USER_ID`): the schema of
// the user's access profile (docs/decisions.md, "A GraphQL schema per access profile"), built from
// the database's current metadata and the user's grants (TB_USER_GRANT) and peso (TB_USER) as the
// server builds it for their requests (src/schema/cache.ts), printed as `schema:print` prints the
// full one (types and fields sorted). What a front end generates its types and documents from when
// they must run for users of that profile: the full schema names fields a lower profile's schema
// lacks, and a document naming one fails validation for such a user as a whole.
import { lexicographicSortSchema, printSchema } from "graphql";
import { loadUserGrants } from "../auth/profile.ts";
import { findUser } from "../auth/users.ts";
import { NotFoundError } from "../errors.ts";
import { graphqlResolvers } from "../graphql/resolve.ts";
import { createSchemaCache } from "../schema/cache.ts";
import type { MetadataModel, Queryable } from "../types.ts";

/** What the user's schema is read from: the main database (TB_USER, grants) and the metadata. */
export interface UserSchemaSources {
  db: Queryable;
  metadata: { current(): MetadataModel };
}

/** A user's printed schema, with what it was chosen by. */
export interface UserSchema {
  sdl: string;
  tenantId: string;
  peso: number;
  active: boolean;
}

/** The SDL of the schema `userId` is served; 404 USER_NOT_FOUND for a user TB_USER does not hold. */
export async function userSchema(sources: UserSchemaSources, userId: string): Promise<UserSchema> {
  const user = await findUser(sources.db, userId);
  if (!user)
    throw new NotFoundError("USER_NOT_FOUND", `No user ${JSON.stringify(userId.slice(0, 60))} in TB_USER.`);
  const grants = await loadUserGrants(sources.db, user.userId);
  // As a session's principal carries it (src/auth/session-auth.ts).
  const peso = Number(user.peso);
  const cache = createSchemaCache({ current: () => sources.metadata.current() }, graphqlResolvers());
  try {
    const schema = cache.forCaller({ grants, peso });
    return {
      sdl: printSchema(lexicographicSortSchema(schema)),
      tenantId: user.tenantId,
      peso,
      active: user.active,
    };
  } finally {
    cache.close();
  }
}
