// The plain GraphQL POST, answered without graphql-yoga's HTTP layer (issue 19; issue 35 §7): a
// JSON body of query, variables and operationName, answered as application/json (or
// application/graphql-response+json), whose document is a query or a mutation that parses and
// validates. It runs the same envelop chain and engine as yoga (src/graphql/chain.ts; graphql-js's
// parser and validation, @graphql-tools/executor's interpreter), by the chain's own runners of its
// hooks; its status and body are those yoga's regular result processor makes (the
// equivalence test, test/graphql/plain-post.test.ts, compares them byte for byte). Everything else
// (GET, other media types, subscriptions, a document refused before it runs) is left to yoga,
// which answers it through the same chain. A body may carry `extensions.persistedQuery` or
// `documentId` (persisted operations, src/graphql/persisted.ts): its document is resolved here, by
// the module yoga's side uses too, before the chain runs it.
import type { Plugin } from "@envelop/core";
import type { FastifyRequest } from "fastify";
import { type DocumentNode, type ExecutionResult, type GraphQLSchema, getOperationAST } from "graphql";
import { chainDocuments, chainExecute } from "./chain.ts";
import type { PersistedOperations, TenantScoped } from "./persisted.ts";

type MediaType = "application/json" | "application/graphql-response+json";

export interface PlainReply {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The operation run; null for a refused persisted operation. */
  operation: "query" | "mutation" | null;
}

const BODY_KEYS = new Set(["query", "variables", "operationName", "extensions", "documentId"]);

/** The Accept headers served here, each with the media type yoga answers it with. */
const ANSWERED_AS = new Map<string | undefined, MediaType>([
  [undefined, "application/json"],
  ["*/*", "application/json"],
  ["application/json", "application/json"],
  ["application/graphql-response+json", "application/graphql-response+json"],
]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The parts of a plain POST: its media type and body; null if yoga must answer the request. */
export function plainRequest(request: FastifyRequest): {
  mediaType: MediaType;
  /** The document text; undefined when the body names a persisted operation by its hash alone. */
  query: string | undefined;
  extensions: { persistedQuery: unknown } | undefined;
  /** A persisted operation's hash by its other name (persisted.ts checks it). */
  documentId: unknown;
  variables: Record<string, unknown> | undefined;
  operationName: string | undefined;
} | null {
  if (request.method !== "POST" || request.url.includes("?")) return null;
  const mediaType = ANSWERED_AS.get(request.headers.accept);
  if (!mediaType) return null;
  const type = request.headers["content-type"];
  if (type === undefined || type.split(";")[0]!.trim().toLowerCase() !== "application/json") return null;
  const body = request.body;
  if (!isPlainObject(body)) return null;
  for (const key in body) if (!BODY_KEYS.has(key)) return null;
  const { query, variables, operationName, extensions, documentId } = body;
  // Of extensions, only a persisted operation's are taken here (yoga takes any other).
  if (extensions !== undefined) {
    if (!isPlainObject(extensions) || extensions.persistedQuery === undefined) return null;
    for (const key in extensions) if (key !== "persistedQuery") return null;
  }
  const namesPersisted = extensions !== undefined || (documentId !== undefined && documentId !== null);
  if (typeof query !== "string" && (!namesPersisted || query !== undefined)) return null;
  if (variables !== undefined && variables !== null && !isPlainObject(variables)) return null;
  if (operationName !== undefined && operationName !== null && typeof operationName !== "string") return null;
  return {
    mediaType,
    query: query as string | undefined,
    extensions: extensions as { persistedQuery: unknown } | undefined,
    documentId,
    variables: variables ?? undefined,
    operationName: operationName ?? undefined,
  };
}

/** The response yoga's regular result processor makes of `result`. */
function replyOf(result: ExecutionResult, mediaType: MediaType): Omit<PlainReply, "operation"> {
  const headers: Record<string, string> = { "content-type": `${mediaType}; charset=utf-8` };
  if (!result.errors?.length) return { status: 200, headers, body: JSON.stringify(result) };
  let status = 0;
  let unexpected = false;
  const errors = result.errors.map((error) => {
    const json = error.toJSON();
    const http = error.extensions?.http as
      | { status?: number; headers?: Record<string, string>; spec?: boolean }
      | undefined;
    if (http) {
      if (http.headers) Object.assign(headers, http.headers);
      if (!(http.spec && mediaType === "application/json") && http.status && http.status > status)
        status = http.status;
    } else if (error.extensions?.unexpected) {
      unexpected = true;
    }
    // As yoga's serializer: the internal extensions are not sent.
    if (json.extensions && ("http" in json.extensions || "unexpected" in json.extensions)) {
      const { http: _http, unexpected: _unexpected, ...extensions } = json.extensions;
      (json as { extensions?: unknown }).extensions = Object.keys(extensions).length ? extensions : undefined;
    }
    return json;
  });
  if (!status) status = unexpected && !("data" in result) ? 500 : 200;
  // As graphql-js orders them: the errors, then the data.
  return { status, headers, body: JSON.stringify({ errors, data: result.data }) };
}

export type PlainPost = (
  request: FastifyRequest,
  schema: GraphQLSchema,
  contextValue: TenantScoped,
) => Promise<PlainReply | null>;

/**
 * The plain POST transport over `chain`; null for a request yoga must answer. `persisted` resolves
 * persisted operations (the same resolution yoga's side runs).
 */
export function createPlainPost(chain: Plugin[], persisted: PersistedOperations): PlainPost {
  // Parsed, validated and executed by the chain's own runners of its hooks (as envelop runs them).
  const documents = chainDocuments(chain);
  const execute = chainExecute(chain);
  return async (request, schema, contextValue) => {
    const plain = plainRequest(request);
    if (!plain) return null;
    const resolved = persisted.resolve(contextValue.caller.principal.tenantId, plain);
    if (resolved.error) return { ...replyOf({ errors: [resolved.error] }, plain.mediaType), operation: null };
    if (resolved.query === undefined) return null; // yoga answers a body without a document
    let document: DocumentNode;
    try {
      document = documents.parse(contextValue, resolved.query);
    } catch {
      return null; // yoga reads it again (from the cache's miss) and answers with the error
    }
    if (documents.validate(contextValue, schema, document).length) return null;
    // Parsed and validated: a document sent with its hash is registered (persisted.ts).
    resolved.register?.();
    const operation = getOperationAST(document, plain.operationName);
    if (!operation || operation.operation === "subscription") return null;
    const result = await execute({
      schema,
      document,
      contextValue,
      variableValues: plain.variables,
      operationName: plain.operationName,
    });
    return { ...replyOf(result, plain.mediaType), operation: operation.operation };
  };
}
