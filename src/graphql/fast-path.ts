// The plain GraphQL POST without graphql-yoga (issue 19): a JSON body of query, variables and
// operationName, answered as application/json (or application/graphql-response+json), whose document is a query or a mutation that parses,
// passes the complexity limits and validates. Its document is prepared once per (schema, text) and
// kept in a bounded cache; graphql-js executes it with the context yoga would give; its errors
// are masked by the same function and its status and body are those yoga's regular result
// processor makes. Everything else (GET, other media types, subscriptions, a document that fails to
// parse or validate, a variable that does not coerce) is left to yoga, which answers it as before.
import type { FastifyRequest } from "fastify";
import {
  type DocumentNode,
  type ExecutionResult,
  type GraphQLError,
  type GraphQLSchema,
  getOperationAST,
  parse,
  validate,
} from "graphql";
import { type CompiledQuery, compileQuery, isCompiledQuery } from "graphql-jit";
import {
  checkComplexity,
  type ComplexityLimits,
  MAX_SOURCE_NESTING,
  MAX_TOKENS,
  type ValueEstimate,
  sourceNesting,
} from "./complexity.ts";

/** Prepared documents kept per schema; the oldest used is dropped past this many. */
const MAX_DOCUMENTS = 1000;

type MediaType = "application/json" | "application/graphql-response+json";

export interface FastOperation {
  mediaType: MediaType;
  document: DocumentNode;
  /** The operation compiled by graphql-jit, once per (schema, document, operation name). */
  compiled: CompiledQuery;
  /** The values it may answer, as the complexity limits estimate them (heavy-request lanes). */
  values: number;
  operation: "query" | "mutation";
  operationName: string | undefined;
  variables: Record<string, unknown> | undefined;
}

export interface FastReply {
  status: number;
  headers: Record<string, string>;
  body: string;
}

const BODY_KEYS = new Set(["query", "variables", "operationName"]);

/** The Accept headers the fast path serves, each with the media type yoga answers it with. */
const ANSWERED_AS = new Map<string | undefined, MediaType>([
  [undefined, "application/json"],
  ["*/*", "application/json"],
  ["application/json", "application/json"],
  ["application/graphql-response+json", "application/graphql-response+json"],
]);

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

export function createFastPath(limits: ComplexityLimits, estimate: ValueEstimate) {
  const prepared = new WeakMap<GraphQLSchema, Map<string, DocumentNode | null>>();
  type Compiled = { compiled: CompiledQuery; values: number } | null;
  const compiledOf = new WeakMap<DocumentNode, Map<string | undefined, Compiled>>();

  /** `document`'s operation compiled for `schema` (prepared documents are per schema); null if not. */
  function compile(
    schema: GraphQLSchema,
    document: DocumentNode,
    operationName: string | undefined,
  ): Compiled {
    let byName = compiledOf.get(document);
    if (!byName) {
      byName = new Map();
      compiledOf.set(document, byName);
    }
    let compiled = byName.get(operationName);
    if (compiled === undefined) {
      const made = compileQuery(schema, document, operationName);
      compiled = isCompiledQuery(made)
        ? { compiled: made, values: estimate(schema, document, operationName) }
        : null;
      byName.set(operationName, compiled);
    }
    return compiled;
  }

  /** The document of `text` if it parses, is within the limits and validates; null if not. */
  function prepare(schema: GraphQLSchema, text: string): DocumentNode | null {
    let documents = prepared.get(schema);
    if (!documents) {
      documents = new Map();
      prepared.set(schema, documents);
    }
    const known = documents.get(text);
    if (known !== undefined) {
      documents.delete(text);
      documents.set(text, known);
      return known;
    }
    let document: DocumentNode | null = null;
    try {
      if (sourceNesting(text) <= MAX_SOURCE_NESTING) {
        const parsed = parse(text, { maxTokens: MAX_TOKENS });
        if (!checkComplexity(schema, parsed, limits) && validate(schema, parsed).length === 0)
          document = parsed;
      }
    } catch {
      document = null; // yoga reads it again and answers with the error
    }
    if (documents.size >= MAX_DOCUMENTS) documents.delete(documents.keys().next().value as string);
    documents.set(text, document);
    return document;
  }

  /** The request's operation if it can take the fast path; null if yoga must answer it. */
  function operationOf(request: FastifyRequest, schema: GraphQLSchema): FastOperation | null {
    if (request.method !== "POST" || request.url.includes("?")) return null;
    const mediaType = ANSWERED_AS.get(request.headers.accept);
    if (!mediaType) return null;
    const type = request.headers["content-type"];
    if (type === undefined || type.split(";")[0]!.trim().toLowerCase() !== "application/json") return null;
    const body = request.body;
    if (!isPlainObject(body)) return null;
    for (const key in body) if (!BODY_KEYS.has(key)) return null;
    const { query, variables, operationName } = body;
    if (typeof query !== "string") return null;
    if (variables !== undefined && variables !== null && !isPlainObject(variables)) return null;
    if (operationName !== undefined && operationName !== null && typeof operationName !== "string")
      return null;
    const document = prepare(schema, query);
    if (!document) return null;
    const operation = getOperationAST(document, operationName ?? undefined);
    if (!operation || operation.operation === "subscription") return null;
    const compiled = compile(schema, document, operationName ?? undefined);
    if (!compiled) return null;
    return {
      mediaType,
      document,
      ...compiled,
      operation: operation.operation,
      operationName: operationName ?? undefined,
      variables: variables ?? undefined,
    };
  }

  return { operationOf };
}

/**
 * Executes `op`; null when graphql-js refused the request before running it (a variable that
 * does not coerce), which yoga then answers with its own error.
 */
export async function executeFast(
  op: FastOperation,
  contextValue: unknown,
  maskError: (error: GraphQLError) => GraphQLError,
): Promise<FastReply | null> {
  const result: ExecutionResult = await op.compiled.query(undefined, contextValue, op.variables ?? {});
  if (!("data" in result) || result.data === undefined) return null;
  const headers: Record<string, string> = { "content-type": `${op.mediaType}; charset=utf-8` };
  let status = 200;
  if (!result.errors?.length) return { status, headers, body: JSON.stringify(result) };
  let statusFromErrors = 0;
  const errors = result.errors.map((error) => {
    const masked = maskError(error);
    const http = masked.extensions?.http as
      | { status?: number; headers?: Record<string, string>; spec?: boolean }
      | undefined;
    if (http) {
      if (http.headers) Object.assign(headers, http.headers);
      if (
        !(http.spec && op.mediaType === "application/json") &&
        http.status &&
        http.status > statusFromErrors
      )
        statusFromErrors = http.status;
    }
    return masked.toJSON();
  });
  if (statusFromErrors) status = statusFromErrors;
  // As yoga's serializer: the internal extensions are not sent.
  for (const error of errors) {
    if (error.extensions && ("http" in error.extensions || "unexpected" in error.extensions)) {
      const { http: _http, unexpected: _unexpected, ...extensions } = error.extensions;
      (error as { extensions?: unknown }).extensions = Object.keys(extensions).length
        ? extensions
        : undefined;
    }
  }
  // As graphql-js orders them: the errors, then the data.
  return { status, headers, body: JSON.stringify({ errors, data: result.data }) };
}
