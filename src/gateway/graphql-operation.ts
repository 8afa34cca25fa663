// Whether a GraphQL POST only reads (decisions.md §9): the gateway sends such a request to the read
// backends, as it does a GET, and everything else to the write backends, which run every
// operation. Only a JSON body the gateway can read with certainty counts as a read: a body the
// backend would refuse (not UTF-8, not JSON, an array: batching is off, a document over
// GRAPHQL_MAX_DOCUMENT_BYTES or that does not parse, no operation or no single one to run) goes to
// write, which answers it as it always has. The gateway only routes: it refuses nothing, and the
// bytes it forwards are those it received (server.ts).
import { hash as digest } from "node:crypto";
import { isUtf8 } from "node:buffer";
import { type DocumentNode, getOperationAST, Kind, parse } from "graphql";
import { LRUCache } from "lru-cache";
import { requestedHash } from "../graphql/persisted.ts";

/** Hashes of query-only documents the gateway has seen with their text (about 100 bytes each). */
const LEARNED_HASHES = 10_000;

/**
 * Documents parsed already, by their text (a client sends the same few again and again): at most
 * this many characters of text, counted twice (the key and the document parsed from it).
 */
const PARSED_DOCUMENT_CHARS = 4 * 1024 * 1024;

export interface GraphQLReadsOptions {
  /** GRAPHQL_MAX_DOCUMENT_BYTES: a longer document is the backend's 413, not parsed here. */
  maxDocumentBytes: number;
  /** The trusted documents (GRAPHQL_TRUSTED_DOCUMENTS) by hex hash: known to every backend. */
  trustedDocuments: ReadonlyMap<string, string> | null;
}

export interface GraphQLReads {
  /** Whether the JSON body of a GraphQL POST runs a query, and nothing else, for certain. */
  isQuery(body: Buffer): boolean;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function parsed(text: string): DocumentNode | null {
  try {
    return parse(text, { noLocation: true });
  } catch {
    // A syntax error, or a document nested past the stack: the backend's to answer.
    return null;
  }
}

/** Whether every operation of a document is a query (whichever one a request names runs a query). */
function onlyQueries(document: DocumentNode): boolean {
  let operations = 0;
  for (const d of document.definitions) {
    if (d.kind !== Kind.OPERATION_DEFINITION) continue;
    if (d.operation !== "query") return false;
    operations++;
  }
  return operations > 0;
}

/**
 * A request carrying a persisted operation's hash alone (src/graphql/persisted.ts) names a document
 * the gateway reads only if it knows it: a trusted document, or one whose text it saw with that
 * hash in an earlier request (checked: the hash is the text's SHA-256) and that holds queries only.
 * Without that a query sent by hash would always go to write, which never registers it (its text
 * goes to read), and every such query would cost an automatic-persisted-query client a
 * PERSISTED_QUERY_NOT_FOUND and a second request. A hash the gateway does not know goes to write.
 */
export function createGraphQLReads(opts: GraphQLReadsOptions): GraphQLReads {
  const learned = new LRUCache<string, true>({ max: LEARNED_HASHES });
  const documents = new LRUCache<string, DocumentNode | false>({
    maxSize: PARSED_DOCUMENT_CHARS,
    sizeCalculation: (_document, text) => 2 * text.length + 1,
  });
  const documentOf = (text: string): DocumentNode | null => {
    if (Buffer.byteLength(text) > opts.maxDocumentBytes) return null;
    let document = documents.get(text);
    if (document === undefined) {
      document = parsed(text) ?? false;
      documents.set(text, document);
    }
    return document || null;
  };

  return {
    isQuery(body) {
      if (!isUtf8(body)) return false;
      let request: unknown;
      try {
        request = JSON.parse(body.toString("utf8"));
      } catch {
        return false;
      }
      if (!isPlainObject(request)) return false;
      const { query, operationName } = request;
      if (operationName !== undefined && operationName !== null && typeof operationName !== "string")
        return false;
      // `extensions.persistedQuery` or `documentId`, as the backends read them: a malformed or
      // ambiguous hash is their 400, answered by write.
      const requested = requestedHash(request);
      if ("error" in requested) return false;
      const { hash } = requested;
      let document: DocumentNode | null;
      if (typeof query === "string" && query !== "") {
        document = documentOf(query);
        if (document && hash && onlyQueries(document) && digest("sha256", query, "hex") === hash)
          learned.set(hash, true);
      } else if (hash !== undefined && (query === undefined || query === "")) {
        if (learned.get(hash)) return true;
        const trusted = opts.trustedDocuments?.get(hash);
        document = trusted === undefined ? null : documentOf(trusted);
      } else {
        return false;
      }
      if (!document) return false;
      // The operation that runs, chosen as the backend chooses it (src/graphql/chain.ts).
      return getOperationAST(document, operationName ?? undefined)?.operation === "query";
    },
  };
}
