// Persisted operations (issue 38 §2; spec decisions.md section 21): a request may carry
// `extensions.persistedQuery = {version: 1, sha256Hash}` instead of (or with) `query`. This module
// turns a request's `query` and `extensions` into the document text to run, or the GraphQL error to
// answer; both HTTP transports call it (the plain POST, src/graphql/plain-post.ts, and yoga through
// its onParams hook, `persistedParams` below) before the one chain (src/graphql/chain.ts) runs the
// text, so a persisted operation passes the same rules as any other. The chain's document cache
// keys parsed and validated documents by the hash of their text: a persisted operation's second run
// is neither parsed nor validated again.
//
// - Automatic persisted queries: a known hash runs its document; an unknown hash alone is
//   `PERSISTED_QUERY_NOT_FOUND` (404: the code APQ clients answer by sending the document with the
//   hash; not 400, which makes Apollo's link stop using hashes); hash and document together run the
//   document once its hash (SHA-256, hex, of the exact text) is checked
//   (`PERSISTED_QUERY_HASH_MISMATCH`, 400, otherwise), and register it once the chain has parsed
//   and validated it (the resolution's `register`, which the transport calls then): a document
//   that does not parse, validate or pass the limits checked with validation is not kept, so its
//   hash alone answers PERSISTED_QUERY_NOT_FOUND, not that refusal again.
// - Registrations are kept per tenant in this process's memory, bounded in count and bytes
//   (GRAPHQL_PERSISTED_MAX_PER_TENANT, GRAPHQL_PERSISTED_MAX_BYTES_PER_TENANT), the least recently
//   used going first, and for at most MAX_TENANTS tenants. With several processes a client whose
//   hash another process registered gets NOT_FOUND and registers it again: the protocol's own path.
// - `documentId` (the GraphQL-over-HTTP persisted-documents proposal, which graphql-yoga's
//   persisted-operations plugin and the codegen client preset's docs use: a body's `documentId`, a
//   GET's `documentId` parameter, a WebSocket payload's `documentId`) is another spelling of the
//   same hash: `sha256:<hex>` or bare hex, resolved here by the same rules (`requestedHash`). With
//   `query` it is a hash with its document; beside a persistedQuery hash it must name the same
//   document (PERSISTED_QUERY_INVALID otherwise: which one would run is not the server's guess).
// - Trusted documents: GRAPHQL_TRUSTED_DOCUMENTS names a JSON file `{hash: document}` (the
//   persisted-documents manifest `npm run codegen` writes, examples/gql/persisted-documents.json,
//   whose keys are `sha256:<hex>`; bare hex is taken too), read and checked at start-up
//   (`readTrustedDocuments`). Its documents are known to every tenant. With GRAPHQL_TRUSTED_ONLY=true
//   only they run: any other document, or an unknown hash, is 400 `PERSISTED_QUERY_ONLY`, and nothing
//   is registered.
import { hash as digest } from "node:crypto";
import { readFileSync } from "node:fs";
import { GraphQLError } from "graphql";
import { LRUCache } from "lru-cache";

/** Tenants whose registrations are kept; past it, the least recently used tenant's go. */
const MAX_TENANTS = 1000;

const HASH = /^(?:sha256:)?([0-9a-fA-F]{64})$/;

export interface PersistedLimits {
  /** Registered documents kept per tenant. */
  maxPerTenant: number;
  /** Bytes (UTF-8) of registered documents kept per tenant. */
  maxBytesPerTenant: number;
  /** The trusted documents by the hex SHA-256 of their text, or null. */
  trustedDocuments: ReadonlyMap<string, string> | null;
  /** Only the trusted documents run. */
  trustedOnly: boolean;
}

/**
 * The document text to run (undefined: the request has none; the transport answers that), or the
 * error to answer. `register`, for a document sent with its hash: registers it; the transport calls
 * it once the chain has parsed and validated the document (never for one refused there).
 */
export type PersistedResolution =
  | { query: string | undefined; register?: () => void; error?: undefined }
  | { error: GraphQLError };

/** The parameters of a request that name its document (each as the request gave it, unchecked). */
export interface DocumentParams {
  query?: unknown;
  extensions?: unknown;
  documentId?: unknown;
}

export interface PersistedOperations {
  /** What `query`, `extensions` and `documentId` of a request of `tenantId` ask to run. */
  resolve(tenantId: string, params: DocumentParams): PersistedResolution;
  /** A tenant's registrations: count and bytes (tests, metrics). */
  stats(tenantId: string): { entries: number; bytes: number };
}

/** The hex SHA-256 of a document's exact text: the hash persisted operations are named by. */
export function documentHash(text: string): string {
  return digest("sha256", text, "hex");
}

function refusal(message: string, code: string, status: number): GraphQLError {
  return new GraphQLError(message, { extensions: { code, status, http: { status } } });
}

export const persistedQueryNotFound = () =>
  // The message is the one APQ clients (Apollo's persisted-queries link) look for, with the code.
  refusal("PersistedQueryNotFound", "PERSISTED_QUERY_NOT_FOUND", 404);

const hashMismatch = () =>
  refusal(
    "The persisted query's sha256Hash is not the SHA-256 (hex) of its document.",
    "PERSISTED_QUERY_HASH_MISMATCH",
    400,
  );

const persistedOnly = () =>
  refusal(
    "Only trusted documents run here (GRAPHQL_TRUSTED_ONLY): send a hash of the persisted-documents manifest.",
    "PERSISTED_QUERY_ONLY",
    400,
  );

const invalidPersistedQuery = () =>
  refusal(
    "extensions.persistedQuery must be {version: 1, sha256Hash: <64 hex digits>}.",
    "PERSISTED_QUERY_INVALID",
    400,
  );

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

const invalidDocumentId = () =>
  refusal(
    "documentId must be the SHA-256 of a document: sha256:<64 hex digits> (or the 64 hex digits alone).",
    "PERSISTED_QUERY_INVALID",
    400,
  );

const conflictingHashes = () =>
  refusal(
    "documentId and extensions.persistedQuery.sha256Hash name different documents: send one of them.",
    "PERSISTED_QUERY_INVALID",
    400,
  );

/** The hex hash a request's `extensions` name (undefined: none; null: a malformed one). */
export function persistedHashOf(extensions: unknown): string | undefined | null {
  if (!isPlainObject(extensions) || extensions.persistedQuery === undefined) return undefined;
  const persisted = extensions.persistedQuery;
  if (!isPlainObject(persisted) || persisted.version !== 1 || typeof persisted.sha256Hash !== "string")
    return null;
  const match = HASH.exec(persisted.sha256Hash);
  return match ? match[1]!.toLowerCase() : null;
}

/** The hex hash a `documentId` names (undefined: none, as null is; null: a malformed one). */
export function documentIdHashOf(documentId: unknown): string | undefined | null {
  if (documentId === undefined || documentId === null) return undefined;
  const match = typeof documentId === "string" ? HASH.exec(documentId) : null;
  return match ? match[1]!.toLowerCase() : null;
}

/**
 * The hex hash a request names, by `extensions.persistedQuery` or `documentId` (the same if both),
 * undefined for none, or the refusal of a malformed or ambiguous one.
 */
export function requestedHash(
  params: DocumentParams,
): { hash: string | undefined } | { error: GraphQLError } {
  const persisted = persistedHashOf(params.extensions);
  if (persisted === null) return { error: invalidPersistedQuery() };
  const documentId = documentIdHashOf(params.documentId);
  if (documentId === null) return { error: invalidDocumentId() };
  if (persisted !== undefined && documentId !== undefined && persisted !== documentId)
    return { error: conflictingHashes() };
  return { hash: persisted ?? documentId };
}

/**
 * `maxDocumentBytes`: GRAPHQL_MAX_DOCUMENT_BYTES. A document over it is refused (413) before it is
 * parsed, so it is not registered (nor would `register` keep it): its hash alone then answers
 * PERSISTED_QUERY_NOT_FOUND, not that 413 again.
 */
export function createPersistedOperations(
  limits: PersistedLimits,
  maxDocumentBytes = Number.POSITIVE_INFINITY,
): PersistedOperations {
  const trusted = limits.trustedDocuments ?? new Map<string, string>();
  const tenants = new LRUCache<string, LRUCache<string, string>>({ max: MAX_TENANTS });
  const registrations = (tenantId: string, create: boolean) => {
    let kept = tenants.get(tenantId);
    if (!kept && create) {
      kept = new LRUCache<string, string>({
        max: Math.max(1, limits.maxPerTenant),
        maxSize: Math.max(1, limits.maxBytesPerTenant),
        sizeCalculation: (text) => Math.max(1, Buffer.byteLength(text)),
      });
      tenants.set(tenantId, kept);
    }
    return kept;
  };
  const register = (tenantId: string, hash: string, text: string) => {
    if (limits.trustedOnly || trusted.has(hash) || limits.maxPerTenant === 0) return;
    // A document over the tenant's bytes is run, not kept (lru-cache refuses it); one over the
    // document limit never runs.
    const bytes = Buffer.byteLength(text);
    if (bytes > limits.maxBytesPerTenant || bytes > maxDocumentBytes) return;
    registrations(tenantId, true)!.set(hash, text);
  };

  return {
    resolve(tenantId, params) {
      const requested = requestedHash(params);
      if ("error" in requested) return requested;
      const { hash } = requested;
      const given = params.query;
      // An empty text beside a hash is the hash alone, on every transport: graphql-ws requires a
      // `query` string, so its APQ clients send "" with the hash.
      const query = given === "" && hash !== undefined ? undefined : given;
      if (hash === undefined) {
        // A plain request: in trusted-only mode its text must be a trusted document's.
        if (limits.trustedOnly && typeof query === "string" && !trusted.has(documentHash(query)))
          return { error: persistedOnly() };
        return { query: typeof query === "string" ? query : undefined };
      }
      if (typeof query === "string") {
        if (documentHash(query) !== hash) return { error: hashMismatch() };
        if (limits.trustedOnly && !trusted.has(hash)) return { error: persistedOnly() };
        return { query, register: () => register(tenantId, hash, query) };
      }
      const known =
        trusted.get(hash) ?? (limits.trustedOnly ? undefined : registrations(tenantId, false)?.get(hash));
      if (known !== undefined) return { query: known };
      return { error: limits.trustedOnly ? persistedOnly() : persistedQueryNotFound() };
    },
    stats(tenantId) {
      const kept = registrations(tenantId, false);
      return { entries: kept?.size ?? 0, bytes: kept?.calculatedSize ?? 0 };
    },
  };
}

/**
 * The trusted documents of a manifest `{hash: document}` (the client preset's persisted-documents
 * file: keys `sha256:<hex>` or bare hex), by hex hash. Throws with the reason for a file that cannot
 * be read, is not such an object, or names a document by a hash that is not its SHA-256.
 */
export function readTrustedDocuments(file: string): Map<string, string> {
  let text: string;
  try {
    text = readFileSync(file, "utf8");
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as Error).message}`);
  }
  let manifest: unknown;
  try {
    manifest = JSON.parse(text);
  } catch (err) {
    throw new Error(`${file} is not JSON: ${(err as Error).message}`);
  }
  if (!isPlainObject(manifest))
    throw new Error(
      `${file} must be a JSON object of {sha256Hash: document} (the persisted-documents manifest)`,
    );
  const documents = new Map<string, string>();
  for (const [key, document] of Object.entries(manifest)) {
    const match = HASH.exec(key);
    if (!match)
      throw new Error(`${file}: key "${key}" is not a SHA-256 hash (64 hex digits, optionally "sha256:")`);
    if (typeof document !== "string") throw new Error(`${file}: the document of "${key}" is not a string`);
    const hash = match[1]!.toLowerCase();
    if (documentHash(document) !== hash)
      throw new Error(`${file}: "${key}" is not the SHA-256 of its document`);
    documents.set(hash, document);
  }
  return documents;
}

/** The tenant a request's context belongs to (the caller's). */
export interface TenantScoped {
  caller: { principal: { tenantId: string } };
}

/**
 * yoga's side (GET, and what the plain POST leaves to yoga): its parsed parameters' query replaced
 * by the one `persisted` resolves, or the refusal answered (onParams); a document sent with its
 * hash registered once yoga's run of the chain has validated it (onValidate's `valid`, which the
 * chain's refusals at validation count; the context is the one onParams had).
 */
export function persistedParams(persisted: PersistedOperations) {
  const pending = new WeakMap<object, () => void>();
  return {
    onValidate({ context }: { context: object }) {
      const register = pending.get(context);
      if (!register) return;
      pending.delete(context);
      return ({ valid }: { valid: boolean }) => {
        if (valid) register();
      };
    },
    onParams({
      params,
      request,
      setParams,
      setResult,
      context,
    }: {
      params: { query?: string; extensions?: Record<string, unknown> } & Record<string, unknown>;
      request: { method: string; url: string };
      setParams: (params: never) => void;
      setResult: (result: { errors: GraphQLError[] }) => void;
      context: unknown;
    }) {
      const tenantId = (context as Partial<TenantScoped>).caller?.principal.tenantId ?? "";
      // A JSON body's documentId is among yoga's parameters; a GET's, yoga's parser leaves out.
      const { documentId: bodyDocumentId, ...rest } = params;
      const documentId =
        request.method === "GET"
          ? new URL(request.url, "http://localhost").searchParams.get("documentId") || undefined
          : bodyDocumentId;
      const resolved = persisted.resolve(tenantId, {
        query: params.query,
        extensions: params.extensions,
        documentId,
      });
      // yoga's later hooks refuse a parameter they do not know (documentId): it is resolved here.
      if (resolved.error) {
        // yoga's later hooks still check the parameters: a query (never run: the result is set).
        setParams({ ...rest, query: "" } as never);
        return setResult({ errors: [resolved.error] });
      }
      if (resolved.register) pending.set(context as object, resolved.register);
      if (resolved.query !== params.query || "documentId" in params)
        setParams({ ...rest, query: resolved.query } as never);
    },
  };
}
