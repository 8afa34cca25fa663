// The one chain of rules every GraphQL operation passes, whatever carries it (issue 35 §7): yoga's
// HTTP and SSE transport and the plain POST transport (src/graphql/plain-post.ts) run these same
// envelop plugins, made once per route. In order:
//   1. the document limit (GRAPHQL_MAX_DOCUMENT_BYTES: 413 before anything reads the text);
//   2. parsed documents by a hash of their text (src/graphql/document-cache.ts);
//   3. the source nesting and token limits while parsing, the cost and depth limits before
//      graphql-js validates (src/graphql/complexity.ts), validation results kept per document
//      (new errors with their code and status; graphql-js's abort of its field-merge check as the
//      limit it passed);
//   4. the operation counted (metrics);
//   5. live subscriptions admitted and ended (src/graphql/subscription-guard.ts);
//   6. a mutation's whole write budget checked before its first write (src/graphql/write-budget.ts);
//   7. heavy operations in their tenant's lane (src/http/heavy-requests.ts);
//   8. errors masked by one function (src/graphql/errors.ts), and a mutation stopped by an error
//      names the fields it committed before it.
// Authentication is not here: the caller is authenticated once per HTTP request, in the protected
// scope's hook, and handed in the context. Nothing in a request becomes code: operations run on
// graphql-js's interpreter (docs/decisions.md, "No compiled GraphQL execution").
import { envelop, isAsyncIterable, type Plugin, useEngine, useMaskedErrors } from "@envelop/core";
import { normalizedExecutor } from "@graphql-tools/executor";
import {
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  type GraphQLSchema,
  GraphQLError,
  getOperationAST,
  parse,
  specifiedRules,
  subscribe,
  validate,
} from "graphql";
import type { HeavyRequests, LaneClient } from "../http/heavy-requests.ts";
import { MAX_JSON_DEPTH } from "../json-depth.ts";
import type { Metrics } from "../observability/metrics.ts";
import type { Config, MetadataModel } from "../types.ts";
import { notAcceptable } from "./accept.ts";
import {
  checkComplexity,
  fieldMergeLimit,
  MAX_SOURCE_NESTING,
  MAX_TOKENS,
  sourceNesting,
  tooComplex,
  type ValueEstimate,
} from "./complexity.ts";
import type { DocumentCache } from "./document-cache.ts";
import { asGraphQLError, withCodeAndStatus } from "./errors.ts";
import { guarded, stopSignal } from "./guarded-stream.ts";
import { type ExecuteFn, plannedExecution } from "./planned-execution.ts";
import type { GraphQLContext } from "./resolve.ts";
import type { SubscriptionGuard } from "./subscription-guard.ts";
import { checkPlannedWrites, createPlannedWrites, rootFieldKeys } from "./write-budget.ts";

/** What the chain needs of an operation's context beyond the resolvers' GraphQLContext. */
export interface ChainContext extends GraphQLContext {
  /** The request as its tenant's heavy lane sees it (a client that goes away leaves the lane). */
  laneClient: LaneClient;
  /** The expiry (epoch seconds) of the bearer token the caller was authenticated with. */
  tokenExpiresAt: number | null;
  /**
   * Whether the transport can carry a subscription's stream: over HTTP, whether the Accept header
   * takes text/event-stream; absent (the WebSocket), it can.
   */
  readonly acceptsEventStream?: boolean;
}

export interface ChainDeps {
  limits: Config["graphql"];
  writeLimits: { maxBatchSize: number; requestEventsMaxBytes: number };
  model: () => MetadataModel;
  documents: DocumentCache;
  estimate: ValueEstimate;
  heavy: HeavyRequests;
  guard: SubscriptionGuard;
  metrics: Pick<Metrics, "graphqlOperations" | "graphqlDocumentsParsed" | "graphqlExecutions">;
  maskError: (error: unknown) => Error;
}

/** 413 for a document longer than the limit: data belongs in variables, which have their own. */
export function documentTooLarge(bytes: number, max: number): GraphQLError {
  return new GraphQLError(
    `The GraphQL document is ${bytes} bytes; at most ${max} are accepted. Pass values as variables.`,
    {
      extensions: {
        code: "DOCUMENT_TOO_LARGE",
        status: 413,
        details: { max_document_bytes: max, document_bytes: bytes },
        http: { status: 413 },
      },
    },
  );
}

function operationOf(document: DocumentNode, operationName: string | null | undefined) {
  return getOperationAST(document, operationName ?? undefined);
}

/**
 * The chain as envelop runs it on yoga's engine (graphql-js's parser and validation,
 * @graphql-tools/executor's interpreter): what the chain's own runners below (chainDocuments,
 * chainExecute, chainSubscribe), which the plain POST and the WebSocket run, are held to
 * (test/graphql/chain-execute.test.ts).
 */
export function envelopChain<C extends object>(chain: Plugin<C>[]) {
  return envelop({ plugins: [useEngine(ENGINE), ...chain] });
}

/** graphql-js's parser and validation, @graphql-tools/executor's interpreter: yoga's engine. */
const ENGINE = {
  parse,
  validate,
  execute: normalizedExecutor,
  subscribe: normalizedExecutor,
  specifiedRules,
};

/**
 * The chain's execute phase for a query or a mutation (one result, not a stream), as envelop's
 * orchestrator runs it: each plugin's onExecute in order (awaited when it returns a promise; one
 * that sets a result stops the rest and the execution), then the execute function the hooks left
 * (`setExecuteFn`), then each returned onExecuteDone in order, which may replace the result. The
 * same plugin objects, not a copy of their rules; what it saves is envelop's promise helpers, a
 * callback, a fake promise and a closure per hook and request: about 10 % of a small query's CPU
 * (docs/benchmarks.md, "GraphQL without graphql-jit"). Subscriptions, and every request yoga
 * carries, still run through envelop; the equivalence test (test/graphql/plain-post.test.ts)
 * compares the two byte for byte. Hooks this runner does not run are refused when it is made.
 */
export function chainExecute<C extends object>(
  chain: Plugin<C>[],
  execute: ExecuteFn = ENGINE.execute as ExecuteFn,
) {
  refuseUnrunnableHooks(chain);
  const hooks = chain.flatMap((plugin) => (plugin.onExecute ? [plugin.onExecute] : []));
  type Hook = (typeof hooks)[number];
  type Payload = Parameters<Hook>[0];
  type Done = NonNullable<Extract<Awaited<ReturnType<Hook>>, object>["onExecuteDone"]>;
  return async (args: ExecutionArgs): Promise<ExecutionResult> => {
    let executeFn = execute as Payload["executeFn"];
    let result: ExecutionResult | undefined;
    let stopped = false;
    let done: Done[] | null = null;
    const context = (args.contextValue ?? {}) as C;
    const setExecuteFn: Payload["setExecuteFn"] = (fn) => {
      executeFn = fn;
    };
    const setResultAndStopExecution: Payload["setResultAndStopExecution"] = (stop) => {
      result = stop as ExecutionResult;
      stopped = true;
    };
    const extendContext: Payload["extendContext"] = extenderOf(context);
    for (const hook of hooks) {
      // A payload per hook, as envelop's: each sees the execute function the hooks before it left.
      // Data properties only (a getter in a literal would be an accessor pair per request, kept in
      // the old generation: docs/decisions.md, "Per-request objects have no accessors of their own").
      let after = hook({
        args: args as Payload["args"],
        context,
        executeFn,
        setExecuteFn,
        setResultAndStopExecution,
        extendContext,
      });
      if (after instanceof Promise) after = await after;
      if (after && typeof after === "object" && after.onExecuteDone) {
        done ??= [];
        done.push(after.onExecuteDone);
      }
      if (stopped) break;
    }
    if (!stopped) result = (await executeFn({ ...args, contextValue: context } as never)) as ExecutionResult;
    if (!done) return result!;
    const donePayload = {
      args: args as Payload["args"],
      result: result!,
      setResult(replaced: ExecutionResult) {
        donePayload.result = replaced;
      },
    };
    for (const onDone of done) {
      const next = onDone(donePayload as never);
      if (next instanceof Promise) await next;
    }
    return donePayload.result;
  };
}

type SubscribeHook<C extends object> = NonNullable<Plugin<C>["onSubscribe"]>;
type SubscribeHooks<C extends object> = Extract<Awaited<ReturnType<SubscribeHook<C>>>, object>;
type SubscribeResultHook<C extends object> = NonNullable<SubscribeHooks<C>["onSubscribeResult"]>;
type SubscribeStreamHooks<C extends object> = Extract<ReturnType<SubscribeResultHook<C>>, object>;
type SubscribeNextHook<C extends object> = NonNullable<SubscribeStreamHooks<C>["onNext"]>;
type SubscribeEndHook = () => void;
type SubscribeErrorHook = NonNullable<SubscribeHooks<object>["onSubscribeError"]>;
type SubscribeFn = (args: ExecutionArgs) => unknown;
type SubscribeResult = AsyncIterableIterator<ExecutionResult> | ExecutionResult;

/**
 * The chain's subscribe phase, as envelop's orchestrator runs it: each plugin's onSubscribe in
 * order (awaited when it returns a promise; one that sets a result stops the rest and the
 * subscription), then the subscribe function the hooks left, then each onSubscribeResult in order
 * (which may replace the result, and give onNext and onEnd hooks for the stream); a stream's
 * results then pass every onNext in order, its end every onEnd, and an error it throws every
 * onSubscribeError before it is thrown on. The same plugin objects, not a copy of their rules; what
 * it saves over envelop's `getEnveloped` is kept for as long as the subscription lives: envelop's
 * run of the chain per subscription, its arrays of hooks, and the three iterators it wraps a
 * stream in (one here, only when a hook asks for it): about 5 KB of a WebSocket subscription's
 * memory (docs/benchmarks.md, "bench/ws-subscriptions"). The envelop equivalence is tested in
 * test/graphql/chain-execute.test.ts; yoga's SSE subscriptions still run through envelop.
 */
export function chainSubscribe<C extends object>(
  chain: Plugin<C>[],
  baseSubscribe: SubscribeFn = graphqlJsSubscribe,
) {
  refuseUnrunnableHooks(chain);
  const hooks = chain.flatMap((plugin) => (plugin.onSubscribe ? [plugin.onSubscribe] : []));
  type Payload = Parameters<SubscribeHook<C>>[0];
  return async (args: ExecutionArgs): Promise<SubscribeResult> => {
    let subscribeFn = baseSubscribe as unknown as Payload["subscribeFn"];
    let result: SubscribeResult | undefined;
    let stopped = false;
    let resultHooks: SubscribeResultHook<C>[] | null = null;
    let errorHooks: SubscribeErrorHook[] | null = null;
    const context = (args.contextValue ?? {}) as C;
    const setSubscribeFn: Payload["setSubscribeFn"] = (fn) => {
      subscribeFn = fn;
    };
    const setResultAndStopExecution: Payload["setResultAndStopExecution"] = (stop) => {
      result = stop as SubscribeResult;
      stopped = true;
    };
    const extendContext = extenderOf(context);
    for (const hook of hooks) {
      let after = hook({
        args: args as Payload["args"],
        context,
        subscribeFn,
        setSubscribeFn,
        setResultAndStopExecution,
        extendContext,
      });
      if (after instanceof Promise) after = await after;
      if (after && typeof after === "object") {
        if (after.onSubscribeResult) {
          resultHooks ??= [];
          resultHooks.push(after.onSubscribeResult);
        }
        if (after.onSubscribeError) {
          errorHooks ??= [];
          errorHooks.push(after.onSubscribeError);
        }
      }
      if (stopped) break;
    }
    if (!stopped) result = (await subscribeFn(args as never)) as SubscribeResult;
    let onNext: SubscribeNextHook<C>[] | null = null;
    let onEnd: SubscribeEndHook[] | null = null;
    for (const hook of resultHooks ?? []) {
      const streamHooks = hook({
        args: args as Payload["args"],
        result: result!,
        setResult(replaced) {
          result = replaced as SubscribeResult;
        },
      });
      if (streamHooks?.onNext) {
        onNext ??= [];
        onNext.push(streamHooks.onNext);
      }
      if (streamHooks?.onEnd) {
        onEnd ??= [];
        onEnd.push(streamHooks.onEnd);
      }
    }
    if (!isAsyncIterable<ExecutionResult>(result) || (!onNext && !onEnd && !errorHooks)) return result!;
    return hookedStream(result, args as Payload["args"], onNext, onEnd, errorHooks);
  };
}

/**
 * graphql-js's subscribe, its refusals of the operation's arguments (the errors before any field
 * runs, which have no path: variables that do not coerce) coded as yoga's interpreter codes them
 * (BAD_USER_INPUT, HTTP 400). Its stream is one iterator that runs each event through graphql-js's
 * execute; @graphql-tools/executor's (yoga's) keeps three, an execution context per subscription,
 * and each subscriber's last result and the generator that yielded it until the next event:
 * about 4 KB of a WebSocket subscription (docs/benchmarks.md, "bench/ws-subscriptions").
 */
async function graphqlJsSubscribe(args: ExecutionArgs): Promise<SubscribeResult> {
  const result = await subscribe(args);
  if (isAsyncIterable(result) || !result.errors) return result as SubscribeResult;
  return {
    ...result,
    errors: result.errors.map((error) =>
      error.path
        ? error
        : new GraphQLError(error.message, {
            nodes: error.nodes,
            source: error.source,
            positions: error.positions,
            originalError: error.originalError,
            extensions: { ...error.extensions, http: { status: 400 }, code: "BAD_USER_INPUT" },
          }),
    ),
  };
}

/**
 * A subscription's stream through its hooks, in one iterator: each result through every onNext
 * in order (an onNext that throws closes the source), the end through every onEnd once (done, or
 * closed by its consumer), an error the source or an onNext throws through every onSubscribeError
 * (each may replace it) before it is thrown on.
 */
function hookedStream<C extends object>(
  source: AsyncIterable<ExecutionResult>,
  args: Parameters<SubscribeNextHook<C>>[0]["args"],
  onNext: SubscribeNextHook<C>[] | null,
  onEnd: SubscribeEndHook[] | null,
  onError: SubscribeErrorHook[] | null,
): AsyncIterableIterator<ExecutionResult> {
  const it = source[Symbol.asyncIterator]();
  let ended = false;
  const end = () => {
    if (ended) return;
    ended = true;
    for (const hook of onEnd ?? []) hook();
  };
  const failed = (error: unknown): never => {
    let thrown = error;
    for (const hook of onError ?? [])
      hook({
        error: thrown,
        setError(replaced) {
          thrown = replaced;
        },
      });
    throw thrown;
  };
  const mapped = async (value: ExecutionResult): Promise<ExecutionResult> => {
    let current = value;
    const payload = {
      args,
      result: current,
      setResult(replaced: ExecutionResult) {
        current = replaced;
      },
    };
    for (const hook of onNext!) {
      payload.result = current;
      const pending = hook(payload);
      if (pending instanceof Promise) await pending;
    }
    return current;
  };
  const iterator: AsyncIterableIterator<ExecutionResult> = {
    async next() {
      let step: IteratorResult<ExecutionResult>;
      try {
        step = await it.next();
      } catch (err) {
        return failed(err);
      }
      if (step.done) {
        end();
        return step;
      }
      if (!onNext) return step;
      try {
        return { done: false, value: await mapped(step.value) };
      } catch (err) {
        await Promise.resolve(it.return?.()).catch(() => undefined);
        return failed(err);
      }
    },
    async return(value) {
      const closing = it.return?.(value);
      end();
      return (await closing) ?? { done: true, value: undefined };
    },
    async throw(err) {
      if (it.throw) return it.throw(err);
      throw err;
    },
    [Symbol.asyncIterator]() {
      return iterator;
    },
  };
  return iterator;
}

/**
 * The hooks the chain's runners run (chainDocuments: onParse, onValidate; chainExecute: onExecute;
 * chainSubscribe: onSubscribe), and envelop's orchestrator when it is made (onPluginInit).
 */
const RUNNABLE_HOOKS = new Set(["onParse", "onValidate", "onSubscribe", "onExecute", "onPluginInit"]);

/** A hook payload's `extendContext`: merges what a hook adds into the request's context. */
function extenderOf<C extends object>(context: C): (extension: Partial<C>) => void {
  return (extension) => {
    Object.assign(context, extension);
  };
}

function refuseUnrunnableHooks(chain: readonly object[]): void {
  for (const plugin of chain) {
    const unsupported = Object.keys(plugin).filter((hook) => !RUNNABLE_HOOKS.has(hook));
    if (unsupported.length)
      throw new Error(
        `The chain's runners do not run the hooks ${unsupported.join(", ")}: run them in chainExecute or chainDocuments (with a case in test/graphql/chain-execute.test.ts), or keep the plugin out of the chain`,
      );
  }
}

type ParseHook<C extends object> = NonNullable<Plugin<C>["onParse"]>;
type ParseDone<C extends object> = Extract<ReturnType<ParseHook<C>>, (...args: never[]) => unknown>;
type ValidateHook<C extends object> = NonNullable<Plugin<C>["onValidate"]>;
type ValidateDone<C extends object> = Extract<ReturnType<ValidateHook<C>>, (...args: never[]) => unknown>;
type ValidationRule = (typeof specifiedRules)[number];

/** The engine's validation rules, as useEngine's onValidate adds them; copied before another is added. */
const ENGINE_RULES: readonly ValidationRule[] = Object.freeze([...ENGINE.specifiedRules]);

/**
 * The chain's parse and validate phases, as envelop's orchestrator runs them after its engine's
 * hooks (useEngine: graphql-js's parse and validate and its specified rules, where this runner
 * starts from): each plugin's onParse in order with the parse function the hooks before it left;
 * the document one of them set, or else the parse function's (its error kept as the result); each
 * returned onParseDone in order, which may replace the result; an error result thrown. Likewise
 * onValidate, with the rules the hooks added, a result one of them set or else the validation
 * function's, then each onValidateDone. The same plugin objects, not a copy of their rules; what
 * it saves over envelop's `getEnveloped` is a run object per request, and the instrumentation
 * wrappers, closures and rule copies of each phase: about 2 µs of a small query
 * (docs/benchmarks.md, "GraphQL without graphql-jit"). Nor does it fill envelop's map of documents
 * to their text (`getDocumentString`), which no plugin of the chain reads. The envelop equivalence
 * is tested in test/graphql/chain-execute.test.ts; yoga's requests still parse and validate
 * through envelop.
 */
export function chainDocuments<C extends object>(chain: Plugin<C>[]) {
  refuseUnrunnableHooks(chain);
  const parseHooks = chain.flatMap((plugin) => (plugin.onParse ? [plugin.onParse] : []));
  const validateHooks = chain.flatMap((plugin) => (plugin.onValidate ? [plugin.onValidate] : []));
  type ParsePayload = Parameters<ParseHook<C>>[0];
  type ValidatePayload = Parameters<ValidateHook<C>>[0];
  return {
    /** The document of `source`; throws what envelop's parse throws. */
    parse(context: C, source: string): DocumentNode {
      let parseFn: ParsePayload["parseFn"] = ENGINE.parse;
      let result: DocumentNode | Error | null = null;
      let done: ParseDone<C>[] | null = null;
      const extendContext = extenderOf(context);
      const setParseFn: ParsePayload["setParseFn"] = (fn) => {
        parseFn = fn;
      };
      const setParsedDocument: ParsePayload["setParsedDocument"] = (document) => {
        result = document as DocumentNode;
      };
      for (const hook of parseHooks) {
        // A payload per hook, as envelop's, of data properties only (no accessor pairs per request).
        const after = hook({
          context,
          extendContext,
          params: { source, options: undefined },
          parseFn,
          setParseFn,
          setParsedDocument,
        } as ParsePayload);
        if (typeof after === "function") {
          done ??= [];
          done.push(after as ParseDone<C>);
        }
      }
      if (result === null) {
        try {
          result = parseFn(source, undefined) as DocumentNode;
        } catch (err) {
          result = err as Error;
        }
      }
      if (done) {
        const replaceParseResult = (replaced: unknown) => {
          result = replaced as DocumentNode | Error | null;
        };
        for (const onDone of done) onDone({ context, extendContext, replaceParseResult, result } as never);
      }
      if (result === null) throw new Error("Failed to parse document.");
      if (result instanceof Error) throw result;
      return result;
    },
    /** graphql-js's validation errors of `document` on `schema` (none: valid), as envelop's. */
    validate(context: C, schema: GraphQLSchema, document: DocumentNode): readonly GraphQLError[] {
      let rules: readonly ValidationRule[] = ENGINE_RULES;
      let validateFn: ValidatePayload["validateFn"] = ENGINE.validate;
      let result: readonly GraphQLError[] | null = null;
      let done: ValidateDone<C>[] | null = null;
      const extendContext = extenderOf(context);
      let ownRules: ValidationRule[] | null = null;
      const addValidationRule: ValidatePayload["addValidationRule"] = (rule) => {
        ownRules ??= [...ENGINE_RULES];
        ownRules.push(rule);
        rules = ownRules;
      };
      const setValidationFn: ValidatePayload["setValidationFn"] = (fn) => {
        validateFn = fn;
      };
      const setResult: ValidatePayload["setResult"] = (errors) => {
        result = errors;
      };
      for (const hook of validateHooks) {
        const after = hook({
          context,
          extendContext,
          params: { schema, documentAST: document, rules, typeInfo: undefined, options: undefined },
          validateFn,
          addValidationRule,
          setValidationFn,
          setResult,
        } as ValidatePayload);
        if (typeof after === "function") {
          done ??= [];
          done.push(after as ValidateDone<C>);
        }
      }
      result ||= validateFn(schema, document, rules, undefined, undefined);
      if (!result) return [];
      if (done) {
        const valid = result.length === 0;
        const replaceResult = (replaced: readonly GraphQLError[]) => {
          result = replaced;
        };
        for (const onDone of done)
          onDone({ valid, result, context, extendContext, setResult: replaceResult } as never);
      }
      return result;
    },
  };
}

/**
 * An operation whose type the schema has no root for (a mutation from a caller whose schema has
 * no Mutation type: no mutation granted) fails validation like any unknown name
 * (GRAPHQL_VALIDATION_FAILED), as graphql-js 17's KnownOperationTypesRule has it; graphql-js 16
 * validates it and its execution refuses it without a code (answered as BAD_USER_INPUT).
 */
const knownOperationTypes: ValidationRule = (context) => ({
  OperationDefinition(node) {
    if (!context.getSchema().getRootType(node.operation))
      context.reportError(
        new GraphQLError(`The ${node.operation} operation is not supported by the schema.`, { nodes: node }),
      );
  },
});

export function graphqlChain(deps: ChainDeps): Plugin<ChainContext>[] {
  const { limits } = deps;

  const limitDocument: Plugin<ChainContext> = {
    onParse({ params }) {
      const text = typeof params.source === "string" ? params.source : params.source.body;
      // Characters first: no byte count of a text far over the limit.
      if (text.length > limits.maxDocumentBytes || Buffer.byteLength(text) > limits.maxDocumentBytes)
        throw documentTooLarge(Buffer.byteLength(text), limits.maxDocumentBytes);
    },
  };

  const cacheDocuments: Plugin<ChainContext> = {
    onParse({ params, setParsedDocument }) {
      const text = typeof params.source === "string" ? params.source : params.source.body;
      const known = deps.documents.get(text);
      if (known) {
        setParsedDocument(known);
        return;
      }
      deps.metrics.graphqlDocumentsParsed.inc();
      return ({ result }) => {
        if (result && !(result instanceof Error)) deps.documents.set(text, result as DocumentNode);
      };
    },
    onValidate({ params, setResult }) {
      const known = deps.documents.validated(params.schema, params.documentAST);
      if (known) {
        setResult(known);
        return;
      }
      return ({ result, setResult }) => {
        const errors = result as readonly GraphQLError[];
        if (errors.length) {
          // Every error carries a code and a status (spec graphql.md): validation's are the
          // request's (withCodeAndStatus, the one place they are set), graphql-js's abort of its
          // field-merge check the limit it passed. New errors, never these changed in place: one
          // may be graphql-js's module-wide abort error, and a kept result is answered again.
          const coded = errors.map(
            (error) => fieldMergeLimit(error) ?? withCodeAndStatus(error, "GRAPHQL_VALIDATION_FAILED"),
          );
          setResult(coded);
          deps.documents.setValidated(params.schema, params.documentAST, coded);
        } else deps.documents.setValidated(params.schema, params.documentAST, errors);
      };
    },
  };

  // Before graphql-js validates (some of its rules are quadratic in repeated fields): a document
  // over MAX_TOKENS is not parsed further, an operation over a limit is not validated further.
  const tooDeep = () =>
    tooComplex("The document nests selections or values too deeply to be read.", {
      max_depth: limits.maxDepth,
      max_input_depth: MAX_JSON_DEPTH,
      max_nesting: MAX_SOURCE_NESTING,
    });
  const limitComplexity: Plugin<ChainContext> = {
    onParse({ parseFn, setParseFn }) {
      setParseFn((source, options) => {
        const body = typeof source === "string" ? source : source.body;
        if (sourceNesting(body) > MAX_SOURCE_NESTING) throw tooDeep();
        try {
          return parseFn(source, { ...options, maxTokens: MAX_TOKENS });
        } catch (err) {
          if (err instanceof GraphQLError && /\d+ tokens\. Parsing aborted/.test(err.message)) {
            throw tooComplex(`The document has more than ${MAX_TOKENS} tokens.`, { max_tokens: MAX_TOKENS });
          }
          // graphql-js parses recursively: selections or values nested thousands deep overflow it.
          if (err instanceof RangeError) throw tooDeep();
          throw err;
        }
      });
    },
    onValidate({ params, setResult, addValidationRule }) {
      // A document validated before passed these limits then (its kept result says if not).
      if (deps.documents.validated(params.schema, params.documentAST)) return;
      // Validated now (kept after): an operation type the caller's schema lacks is refused too.
      addValidationRule(knownOperationTypes);
      let refused: GraphQLError | null;
      try {
        refused = checkComplexity(params.schema, params.documentAST, limits);
      } catch (err) {
        if (!(err instanceof RangeError)) throw err;
        refused = tooDeep();
      }
      if (refused) setResult([refused]);
    },
  };

  const countOperations: Plugin<ChainContext> = {
    onExecute({ args }) {
      const operation = operationOf(args.document, args.operationName);
      deps.metrics.graphqlOperations.inc({ operation: operation?.operation ?? "unknown" });
    },
  };

  // Live subscriptions: capped, and ended when their session, token or grants no longer hold.
  const guardSubscriptions: Plugin<ChainContext> = {
    async onSubscribe({ args, setResultAndStopExecution }) {
      const ctx = args.contextValue;
      // A request that cannot carry the stream is refused before it takes a place: yoga would
      // answer it 406 without ever starting (or closing) the stream, and the place stayed taken.
      if (ctx.acceptsEventStream === false) {
        setResultAndStopExecution({ errors: [notAcceptable("subscription")] });
        return;
      }
      const stop = stopSignal();
      let admission: Awaited<ReturnType<SubscriptionGuard["admit"]>>;
      try {
        admission = await deps.guard.admit(ctx.caller.principal, ctx.tokenExpiresAt, stop.end);
      } catch (err) {
        setResultAndStopExecution({ errors: [asGraphQLError(err)] });
        return;
      }
      return {
        onSubscribeResult({ result, setResult }) {
          if (Symbol.asyncIterator in result) setResult(guarded(result, stop, admission.release));
          else admission.release();
        },
      };
    },
  };

  // A variable-free mutation's writes are worked out once per document (kept by this chain).
  const plannedWrites = createPlannedWrites();
  const checkWriteBudget: Plugin<ChainContext> = {
    onExecute({ args, setResultAndStopExecution }) {
      const planned = plannedWrites(
        args.schema as GraphQLSchema,
        deps.model(),
        args.document,
        args.operationName,
        args.variableValues as Record<string, unknown> | undefined,
      );
      if (!planned) return;
      try {
        checkPlannedWrites(planned, deps.writeLimits);
      } catch (err) {
        setResultAndStopExecution({ data: null, errors: [asGraphQLError(err)] });
      }
    },
  };

  // Heavy operations take turns per tenant; cheap ones pass at once (without a promise).
  const takeTurns: Plugin<ChainContext> = {
    onExecute({ args, setResultAndStopExecution }) {
      const ctx = args.contextValue;
      const values = deps.estimate(
        args.schema as GraphQLSchema,
        args.document,
        args.operationName,
        args.variableValues as Record<string, unknown> | null | undefined,
      );
      // A cheap operation never asks for its lane client (made per request when first asked).
      if (!deps.heavy.isHeavy(values) || !deps.heavy.waits(values, ctx.laneClient)) return;
      return takeTurn(values, ctx, setResultAndStopExecution);
    },
  };
  async function takeTurn(
    values: number,
    ctx: ChainContext,
    setResultAndStopExecution: (result: ExecutionResult) => void,
  ) {
    let leave: () => void;
    try {
      leave = await deps.heavy.enter(ctx.caller.principal.tenantId, values, ctx.laneClient);
    } catch (err) {
      setResultAndStopExecution({ errors: [asGraphQLError(err)] });
      return;
    }
    return { onExecuteDone: () => leave() };
  }

  // A mutation whose field failed non-null answers `data: null`; the fields before it committed
  // (mutation fields run one after another, and a failure stops the rest): the error names them.
  const reportCommitted: Plugin<ChainContext> = {
    onExecute({ args }) {
      const operation = operationOf(args.document, args.operationName);
      if (operation?.operation !== "mutation") return;
      return {
        onExecuteDone({ result, setResult }) {
          const r = result as ExecutionResult;
          if (!r || Symbol.asyncIterator in r || r.data !== null || r.errors?.length !== 1) return;
          const failed = r.errors[0]!;
          const key = failed.path?.[0];
          if (key === undefined) return;
          const keys = rootFieldKeys(args.document, operation, args.variableValues ?? {});
          const committed = keys.slice(0, Math.max(0, keys.indexOf(String(key))));
          if (!committed.length) return;
          setResult({
            ...r,
            errors: [
              new GraphQLError(failed.message, {
                nodes: failed.nodes,
                source: failed.source,
                positions: failed.positions,
                path: failed.path,
                extensions: { ...failed.extensions, committed },
              }),
            ],
          });
        },
      };
    },
  };

  // Queries and mutations over a plan made once per document (src/graphql/planned-execution.ts);
  // the rest, and anything a plan does not answer exactly as graphql-js, by the engine's
  // interpreter (a failed mutation over a replay of what its planned run did, never run twice).
  const planned = plannedExecution((by) => deps.metrics.graphqlExecutions.inc({ by }));
  const planOperations: Plugin<ChainContext> = {
    onExecute({ executeFn, setExecuteFn }) {
      if (!limits.plannedExecution) {
        deps.metrics.graphqlExecutions.inc({ by: "interpreter" });
        return;
      }
      const fallback = executeFn as ExecuteFn;
      setExecuteFn(((args: Parameters<ExecuteFn>[0]) => planned(args, fallback)) as typeof executeFn);
    },
  };

  return [
    limitDocument,
    cacheDocuments,
    limitComplexity,
    countOperations,
    guardSubscriptions,
    checkWriteBudget,
    takeTurns,
    useMaskedErrors({ maskError: (error) => deps.maskError(error) }),
    reportCommitted,
    planOperations,
  ];
}
