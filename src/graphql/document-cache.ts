// Parsed and validated documents, kept by a hash of their text (issue 35 §3). A request cannot
// pin its text in memory: what is kept — the parsed document, which refers to its source, and
// what the chain derives from it — is bounded in bytes of heap (GRAPHQL_DOCUMENT_CACHE_BYTES), each
// entry weighed by its tokens and its text, the least recently used going first; a document is at
// most GRAPHQL_MAX_DOCUMENT_BYTES long, so one entry is small. The key is a 53-bit hash of the
// text, seeded per cache; a hit is the kept document only when its source is the text sent, so two
// texts of one key cost a parse, never the other's document (docs/decisions.md, "Document text is
// not kept"). Documents that fail to parse are not kept (parsing one is bounded by the document
// limit and MAX_TOKENS, a few milliseconds at most). Validation results are kept per schema and
// parsed document (weakly: they go with the document or the schema).
import { randomInt } from "node:crypto";
import type { DocumentNode, GraphQLError, GraphQLSchema } from "graphql";
import { LRUCache } from "lru-cache";

/** The text a parsed document was parsed from (graphql-js keeps it as the document's source). */
const sourceOf = (document: DocumentNode): string | undefined => document.loc?.source.body;

/**
 * What a kept document weighs per token of its text: the AST graphql-js makes of it (a node and a
 * location per token or so, every token an object linked to the next) about 290 bytes a token,
 * whatever the document's size, and what the chain keeps per document while it is kept (its
 * validation, costs, plans, look-aheads and write budgets, weakly by the document) about 110
 * more. Measured with a full collection before and after: 7.9 KB of AST for a 27-token create of
 * 112 characters, 1.27 MB for a 4,500-token document of 16 KB; 11 KB in all for that create run
 * through the service, 13 KB for a 31-token list (docs/decisions.md, "Document text is not kept").
 */
const BYTES_PER_TOKEN = 400;
/**
 * And per character: the text is kept as the document's source (up to 2 bytes a character), which
 * a long string or comment token refers to.
 */
const BYTES_PER_SOURCE_CHARACTER = 2;

/** The heap a parsed document holds while kept: its tokens' and its text's (above). */
function documentWeight(document: DocumentNode): number {
  let tokens = 0;
  for (let token = document.loc?.startToken ?? null; token; token = token.next) tokens++;
  return tokens * BYTES_PER_TOKEN + (sourceOf(document)?.length ?? 0) * BYTES_PER_SOURCE_CHARACTER;
}

export interface DocumentCache {
  /** The document parsed from `text` before, if kept. */
  get(text: string): DocumentNode | undefined;
  set(text: string, document: DocumentNode): void;
  /** graphql-js's validation errors of `document` on `schema`, if validated before. */
  validated(schema: GraphQLSchema, document: DocumentNode): readonly GraphQLError[] | undefined;
  setValidated(schema: GraphQLSchema, document: DocumentNode, errors: readonly GraphQLError[]): void;
  /** Entries and their weight (tests, metrics). */
  stats(): { entries: number; bytes: number };
}

/**
 * The cache key of a document's text under `seed`: a 53-bit hash of its UTF-16 code units (two
 * 32-bit multiplicative hashes, mixed), never the text. Not collision-resistant, and it need not
 * be: a hit is checked against the kept document's own text. A tenth of the time of the SHA-256 it
 * replaces (`crypto.hash`, about 1.5 µs a request: docs/benchmarks.md), which the check made
 * unnecessary; the seed, random per cache, keeps a client from choosing texts that share a key.
 */
export function documentKey(text: string, seed: number): number {
  let h1 = 0xdeadbeef ^ seed;
  let h2 = 0x41c6ce57 ^ seed;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    h1 = Math.imul(h1 ^ unit, 2654435761);
    h2 = Math.imul(h2 ^ unit, 1597334677);
  }
  h1 = Math.imul(h1 ^ (h1 >>> 16), 2246822507) ^ Math.imul(h2 ^ (h2 >>> 13), 3266489909);
  h2 = Math.imul(h2 ^ (h2 >>> 16), 2246822507) ^ Math.imul(h1 ^ (h1 >>> 13), 3266489909);
  return 4294967296 * (2097151 & h2) + (h1 >>> 0);
}

/**
 * `keyOf` replaces the seeded hash (tests: texts that share a key); the document kept under a key
 * is answered only for its own text.
 */
export function createDocumentCache(
  maxBytes: number,
  options: { keyOf?: (text: string) => number } = {},
): DocumentCache {
  const seed = randomInt(2 ** 32);
  const keyOf = options.keyOf ?? ((text: string) => documentKey(text, seed));
  const documents = new LRUCache<number, DocumentNode>({
    maxSize: Math.max(1, maxBytes),
    sizeCalculation: (document) => Math.max(1, documentWeight(document)),
  });
  const validations = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, readonly GraphQLError[]>>();
  return {
    get(text) {
      if (maxBytes <= 0) return undefined;
      const kept = documents.get(keyOf(text));
      return kept && sourceOf(kept) === text ? kept : undefined;
    },
    set(text, document) {
      // A document without its source could not be told from another text's of the same key.
      if (maxBytes > 0 && sourceOf(document) === text) documents.set(keyOf(text), document);
    },
    validated: (schema, document) => validations.get(schema)?.get(document),
    setValidated(schema, document, errors) {
      let bySchema = validations.get(schema);
      if (!bySchema) {
        bySchema = new WeakMap();
        validations.set(schema, bySchema);
      }
      bySchema.set(document, errors);
    },
    stats: () => ({ entries: documents.size, bytes: documents.calculatedSize }),
  };
}
