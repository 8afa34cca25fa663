// GraphQL schemas per access profile (docs/decisions.md, "A GraphQL schema per access profile"):
// one per (metadata version, profile) — the dimensions the caller reads, the mutations it may use,
// the fields its peso leaves (src/schema/profile.ts) — built on a caller's first request and kept
// in an LRU of MAX_SCHEMAS; callers whose grants and peso give the same profile get the same schema
// object. The schemas of one version share their types (src/schema/shared-types.ts), kept as long
// as the version is current.
// The registry reloads the model on own metadata writes and on NOTIFY from other processes, and
// tells this cache, which rebuilds the most recently used profile's schema in the background
// (requests keep the old one meanwhile); a request that finds a stale version builds its own.
// Requests that started on an old schema finish on it (they hold their own reference).
import type { GraphQLSchema } from "graphql";
import { LRUCache } from "lru-cache";
import { grantsHash } from "../auth/grants.ts";
import type { Grant, MetadataModel } from "../types.ts";
import { buildProfileSchema, type SchemaResolvers } from "./build.ts";
import { fullProfile, profileOf, type SchemaProfile } from "./profile.ts";
import { createSharedTypes, type SharedTypes } from "./shared-types.ts";

/** Schemas kept per metadata version (distinct profiles); the least recently used goes first. */
export const MAX_SCHEMAS = 8;
/** Callers' grant inputs remembered with the key of their profile. */
export const MAX_PROFILE_KEYS = 2000;

/** What a schema is chosen by: the caller's grants and peso (TB_USER_GRANT, the user's weight). */
export interface ProfileInputs {
  readonly grants: readonly Grant[];
  readonly peso: number;
}

export interface SchemaCache {
  /** The schema of the caller's profile under the current metadata version. */
  forCaller(inputs: ProfileInputs): GraphQLSchema;
  /** Every dimension, field and mutation (an administrator's profile) under the current version. */
  full(): GraphQLSchema;
  /** The profile of the caller under the current metadata version. */
  profileOf(inputs: ProfileInputs): SchemaProfile;
  /** The metadata version of the schemas held (null before the first build). */
  version(): number | null;
  /** What is kept for the current version (tests, the bench). */
  stats(): { schemas: number; profileKeys: number } & ReturnType<SharedTypes<unknown>["stats"]>;
  /** Stops following metadata changes. */
  close(): void;
}

interface Kept {
  profile: SchemaProfile;
  schema: GraphQLSchema;
  /** The inputs of the last caller served with it: what a new version rebuilds it for. */
  inputs: ProfileInputs | null;
}

/** What one metadata version keeps. */
interface Generation<C> {
  model: MetadataModel;
  types: SharedTypes<C>;
  /** Profile key per caller inputs (grants hash and peso). */
  keys: LRUCache<string, string>;
  schemas: LRUCache<string, Kept>;
  /** The full profile, once asked for. */
  full: SchemaProfile | null;
}

export function createSchemaCache<C>(
  metadata: { current(): MetadataModel; onChange?(listener: (model: MetadataModel) => void): () => void },
  resolvers: SchemaResolvers<C>,
  options: { maxSchemas?: number } = {},
): SchemaCache {
  const maxSchemas = Math.max(1, options.maxSchemas ?? MAX_SCHEMAS);
  let generation: Generation<C> | null = null;

  const generationOf = (model: MetadataModel): Generation<C> => {
    if (generation?.model.version !== model.version) {
      generation = {
        model,
        // Components bounded by as many dimensions as MAX_SCHEMAS whole schemas hold.
        types: createSharedTypes(model, resolvers, {
          maxComponentDimensions: maxSchemas * Math.max(1, model.dimensions.size),
        }),
        keys: new LRUCache({ max: MAX_PROFILE_KEYS }),
        schemas: new LRUCache({ max: maxSchemas }),
        full: null,
      };
    }
    return generation;
  };

  const keptFor = (gen: Generation<C>, profile: SchemaProfile, inputs: ProfileInputs | null): Kept => {
    let kept = gen.schemas.get(profile.key);
    if (!kept) {
      kept = { profile, schema: buildProfileSchema(profile, gen.types), inputs };
      gen.schemas.set(profile.key, kept);
    } else if (inputs) kept.inputs = inputs;
    return kept;
  };

  const fullOf = (gen: Generation<C>) => (gen.full ??= fullProfile(gen.model));

  const inputsKey = (inputs: ProfileInputs) => `${grantsHash(inputs.grants)}\u0000${inputs.peso}`;

  const forCaller = (gen: Generation<C>, inputs: ProfileInputs): Kept => {
    const key = inputsKey(inputs);
    const profileKey = gen.keys.get(key);
    const known = profileKey === undefined ? undefined : gen.schemas.get(profileKey);
    if (known) return known;
    // A caller not seen under this version, or whose profile's schema was let go.
    const profile = profileOf(gen.model, inputs.grants, inputs.peso);
    gen.keys.set(key, profile.key);
    return keptFor(gen, profile, inputs);
  };

  const stop = metadata.onChange?.((model) => {
    setImmediate(() => {
      // Only if no newer model arrived meanwhile: the schema of the last profile served.
      if (metadata.current().version !== model.version) return;
      const last = generation?.schemas.values().next().value?.inputs;
      const gen = generationOf(model);
      if (last) forCaller(gen, last);
      else keptFor(gen, fullOf(gen), null);
    });
  });

  return {
    forCaller: (inputs) => forCaller(generationOf(metadata.current()), inputs).schema,
    full() {
      const gen = generationOf(metadata.current());
      return keptFor(gen, fullOf(gen), null).schema;
    },
    profileOf: (inputs) => forCaller(generationOf(metadata.current()), inputs).profile,
    version: () => generation?.model.version ?? null,
    stats() {
      const gen = generation;
      return {
        schemas: gen?.schemas.size ?? 0,
        profileKeys: gen?.keys.size ?? 0,
        ...(gen?.types.stats() ?? { inputs: 0, components: 0, componentDimensions: 0 }),
      };
    },
    close: () => stop?.(),
  };
}
