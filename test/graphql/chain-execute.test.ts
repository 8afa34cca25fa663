// The chain's own runners of its hooks (src/graphql/chain.ts), which the plain POST and WebSocket
// transports run queries and mutations with: chainExecute's execute hooks and chainDocuments' parse
// and validate hooks give the same order, stops, replaced functions, added rules and replaced
// results as envelop's orchestrator gives the same plugins (which yoga's transport runs them with),
// and both refuse hooks they do not run.
import type { Plugin } from "@envelop/core";
import {
  buildSchema,
  type DocumentNode,
  type ExecutionArgs,
  type ExecutionResult,
  GraphQLError,
  parse,
  print,
  specifiedRules,
  type ValidationRule,
} from "graphql";
import { describe, expect, it } from "vitest";
import { makeExecutableSchema } from "@graphql-tools/schema";
import {
  chainDocuments,
  chainExecute,
  chainSubscribe,
  envelopChain,
  graphqlChain,
} from "../../src/graphql/chain.ts";
import { createDocumentCache } from "../../src/graphql/document-cache.ts";

const schema = buildSchema("type Query { a: String }");
const document = parse("{ a }");
const rootValue = { a: "from the engine" };

/** A chain that records what ran, in order, into the context's `seen`. */
function recordingChain(options: { stopAt?: string; asyncAt?: string; replaceExecute?: boolean }) {
  type Ctx = { seen: string[] };
  const hook = (name: string): Plugin<Ctx> =>
    ({
      onExecute({ args, setResultAndStopExecution, setExecuteFn, executeFn }) {
        const seen = (args.contextValue as Ctx).seen;
        const run = () => {
          seen.push(`execute ${name}`);
          if (options.replaceExecute && name === "second") {
            setExecuteFn((a) => {
              seen.push("replaced execute");
              return executeFn({ ...a, rootValue: { a: "from the replacement" } });
            });
          }
          if (options.stopAt === name) setResultAndStopExecution({ data: { a: `stopped by ${name}` } });
          return {
            onExecuteDone({
              result,
              setResult,
            }: {
              result: ExecutionResult;
              setResult: (r: ExecutionResult) => void;
            }) {
              seen.push(`done ${name}`);
              setResult({ data: { a: `${(result.data as { a: string }).a} > ${name}` } });
            },
          };
        };
        return options.asyncAt === name ? Promise.resolve().then(run) : run();
      },
    }) as Plugin<Ctx>;
  return [hook("first"), hook("second"), hook("third")];
}

async function bothWays(chain: Plugin<{ seen: string[] }>[]) {
  const args = (): ExecutionArgs => ({ schema, document, rootValue, contextValue: { seen: [] as string[] } });
  const ours = args();
  const oursResult = await chainExecute(chain)(ours);
  const envelops = args();
  const envelopResult = (await envelopChain(chain)(envelops.contextValue as { seen: string[] }).execute(
    envelops,
  )) as ExecutionResult;
  return {
    ours: { result: oursResult, seen: (ours.contextValue as { seen: string[] }).seen },
    envelop: { result: envelopResult, seen: (envelops.contextValue as { seen: string[] }).seen },
  };
}

describe("chainExecute", () => {
  it("runs the hooks in order, then the execution, then every onExecuteDone, as envelop does", async () => {
    const { ours, envelop } = await bothWays(recordingChain({}));
    expect(ours).toEqual({
      result: { data: { a: "from the engine > first > second > third" } },
      seen: ["execute first", "execute second", "execute third", "done first", "done second", "done third"],
    });
    expect(ours).toEqual(envelop);
  });

  it("a hook's result stops the later hooks and the execution; the earlier hooks' onExecuteDone still run", async () => {
    const { ours, envelop } = await bothWays(recordingChain({ stopAt: "second" }));
    expect(ours).toEqual({
      result: { data: { a: "stopped by second > first > second" } },
      seen: ["execute first", "execute second", "done first", "done second"],
    });
    expect(ours).toEqual(envelop);
  });

  it("awaits a hook that returns a promise before the next; a replaced execute function is the one run", async () => {
    const { ours, envelop } = await bothWays(recordingChain({ asyncAt: "first", replaceExecute: true }));
    expect(ours).toEqual({
      result: { data: { a: "from the replacement > first > second > third" } },
      seen: [
        "execute first",
        "execute second",
        "execute third",
        "replaced execute",
        "done first",
        "done second",
        "done third",
      ],
    });
    expect(ours).toEqual(envelop);
  });

  it("refuses a chain with a hook it does not run", () => {
    const building: Plugin = { onContextBuilding() {} };
    expect(() => chainExecute([building])).toThrow(
      "The chain's runners do not run the hooks onContextBuilding",
    );
    expect(() => chainDocuments([building])).toThrow(
      "The chain's runners do not run the hooks onContextBuilding",
    );
  });
});

/** A chain of parse and validate hooks that records what ran into the context's `seen`. */
function documentChain(options: {
  cached?: DocumentNode;
  replaceParse?: boolean;
  replaceParsed?: boolean;
  knownErrors?: readonly GraphQLError[];
  addRule?: boolean;
  replaceErrors?: boolean;
}) {
  type Ctx = { seen: string[] };
  const noB: ValidationRule = (context) => ({
    Field(node) {
      if (node.name.value === "b") context.reportError(new GraphQLError("no b here"));
    },
  });
  const hook = (name: string): Plugin<Ctx> => ({
    onParse({ context, params, parseFn, setParseFn, setParsedDocument }) {
      context.seen.push(`parse ${name} ${String(params.source)}`);
      if (options.cached && name === "first") setParsedDocument(options.cached);
      if (options.replaceParse && name === "second")
        setParseFn((source, parseOptions) => {
          context.seen.push("replaced parse");
          return parseFn(`${String(source)} `, parseOptions);
        });
      return ({ result, replaceParseResult }) => {
        context.seen.push(
          `parsed ${name} ${result instanceof Error ? result.message : print(result as DocumentNode)}`,
        );
        if (options.replaceParsed && name === "third") replaceParseResult(parse("{ a }"));
      };
    },
    onValidate({ context, params, setResult, addValidationRule }) {
      context.seen.push(`validate ${name} ${params.rules?.length ?? "no"} rules`);
      if (options.knownErrors && name === "second") setResult(options.knownErrors);
      if (options.addRule && name === "first") addValidationRule(noB);
      return ({ valid, result, setResult: replace }) => {
        context.seen.push(`validated ${name} ${valid} ${result.map((e) => e.message).join("; ")}`);
        if (options.replaceErrors && name === "third") replace([...result, new GraphQLError("replaced")]);
      };
    },
  });
  return [hook("first"), hook("second"), hook("third")];
}

/** `text` parsed and validated by chainDocuments and by envelop over the same chain. */
function documentsBothWays(chain: Plugin<{ seen: string[] }>[], text: string) {
  type Validate = (ctx: { seen: string[] }, document: DocumentNode) => readonly GraphQLError[];
  const run = (parseOne: (ctx: { seen: string[] }) => DocumentNode, validateOne: Validate) => {
    const ctx = { seen: [] as string[] };
    try {
      const document = parseOne(ctx);
      const errors = validateOne(ctx, document);
      return { document: print(document), errors: errors.map((e) => e.message), seen: ctx.seen };
    } catch (err) {
      return { thrown: (err as Error).message, seen: ctx.seen };
    }
  };
  const ours = chainDocuments(chain);
  const enveloped = envelopChain(chain);
  return {
    ours: run(
      (ctx) => ours.parse(ctx, text),
      (ctx, document) => ours.validate(ctx, twoFields, document),
    ),
    envelop: run(
      (ctx) => enveloped(ctx).parse(text),
      (ctx, document) => enveloped(ctx).validate(twoFields, document),
    ),
  };
}

const twoFields = buildSchema("type Query { a: String b: String }");
const SPECIFIED = specifiedRules.length;

describe("chainDocuments", () => {
  it("parses and validates through every hook in order, then every done hook, as envelop does", () => {
    const { ours, envelop } = documentsBothWays(documentChain({}), "{ b }");
    expect(ours).toEqual({
      document: "{\n  b\n}",
      errors: [],
      seen: [
        "parse first { b }",
        "parse second { b }",
        "parse third { b }",
        "parsed first {\n  b\n}",
        "parsed second {\n  b\n}",
        "parsed third {\n  b\n}",
        `validate first ${SPECIFIED} rules`,
        `validate second ${SPECIFIED} rules`,
        `validate third ${SPECIFIED} rules`,
        "validated first true ",
        "validated second true ",
        "validated third true ",
      ],
    });
    expect(ours).toEqual(envelop);
  });

  it("a document a hook sets is not parsed; the later hooks still run; a done hook may replace it", () => {
    const cached = documentChain({ cached: parse("{ b }"), replaceParsed: true });
    const { ours, envelop } = documentsBothWays(cached, "{ a b }");
    expect(ours.document).toBe("{\n  a\n}");
    expect(ours.seen.slice(0, 6)).toEqual([
      "parse first { a b }",
      "parse second { a b }",
      "parse third { a b }",
      "parsed first {\n  b\n}",
      "parsed second {\n  b\n}",
      "parsed third {\n  b\n}",
    ]);
    expect(ours).toEqual(envelop);
  });

  it("a replaced parse function is the one run; a parse error is thrown after the done hooks saw it", () => {
    const replaced = documentsBothWays(documentChain({ replaceParse: true }), "{ a }");
    expect(replaced.ours.seen).toContain("replaced parse");
    expect(replaced.ours).toEqual(replaced.envelop);
    const broken = documentsBothWays(documentChain({}), "{ a");
    expect(broken.ours).toEqual({
      thrown: "Syntax Error: Expected Name, found <EOF>.",
      seen: [
        "parse first { a",
        "parse second { a",
        "parse third { a",
        "parsed first Syntax Error: Expected Name, found <EOF>.",
        "parsed second Syntax Error: Expected Name, found <EOF>.",
        "parsed third Syntax Error: Expected Name, found <EOF>.",
      ],
    });
    expect(broken.ours).toEqual(broken.envelop);
  });

  it("validation errors a hook sets are the result, not graphql-js's; done hooks may replace them", () => {
    const known = documentsBothWays(documentChain({ knownErrors: [new GraphQLError("known")] }), "{ c }");
    expect(known.ours.errors).toEqual(["known"]);
    expect(known.ours).toEqual(known.envelop);
    const invalid = documentsBothWays(documentChain({ replaceErrors: true }), "{ c }");
    expect(invalid.ours.errors).toEqual([
      'Cannot query field "c" on type "Query". Did you mean "a" or "b"?',
      "replaced",
    ]);
    expect(invalid.ours).toEqual(invalid.envelop);
  });

  it("a rule a hook adds is run beside graphql-js's, and seen by the later hooks", () => {
    const { ours, envelop } = documentsBothWays(documentChain({ addRule: true }), "{ a b }");
    expect(ours.errors).toEqual(["no b here"]);
    expect(ours.seen).toContain(`validate second ${SPECIFIED + 1} rules`);
    expect(ours).toEqual(envelop);
    // graphql-js's own rules are not changed by it.
    expect(specifiedRules.length).toBe(SPECIFIED);
  });
});

/** A schema whose subscription yields `ticks` then, if `fail`, throws; `n` must be an Int. */
const ticking = makeExecutableSchema({
  typeDefs: "type Query { a: String } type Subscription { tick(n: Int, fail: Boolean): Int }",
  resolvers: {
    Subscription: {
      tick: {
        subscribe: async function* (_: unknown, args: { n?: number; fail?: boolean }) {
          for (let i = 1; i <= (args.n ?? 2); i++) yield { tick: i };
          if (args.fail) throw new Error("the source failed");
        },
      },
    },
  },
});

/** A chain of subscribe hooks that records what ran into the context's `seen`. */
function subscribeChain(options: { stopAt?: string; replaceNext?: boolean; replaceError?: boolean }) {
  type Ctx = { seen: string[] };
  const hook = (name: string): Plugin<Ctx> => ({
    async onSubscribe({ context, setResultAndStopExecution }) {
      context.seen.push(`subscribe ${name}`);
      if (options.stopAt === name) setResultAndStopExecution({ data: { tick: -1 } });
      return {
        onSubscribeResult({ result }) {
          context.seen.push(`result ${name} ${Symbol.asyncIterator in result ? "stream" : "single"}`);
          return {
            onNext({ result: value, setResult }) {
              const tick = (value.data as { tick: number } | null)?.tick;
              context.seen.push(`next ${name} ${tick}`);
              if (options.replaceNext && name === "second") setResult({ data: { tick: (tick ?? 0) * 10 } });
            },
            onEnd() {
              context.seen.push(`end ${name}`);
            },
          };
        },
        onSubscribeError({ error, setError }) {
          context.seen.push(`error ${name} ${(error as Error).message}`);
          if (options.replaceError && name === "first") setError(new Error("replaced by first"));
        },
      };
    },
  });
  return [hook("first"), hook("second")];
}

/** `query` subscribed by chainSubscribe and by envelop over the same chain, read to its end. */
async function subscribedBothWays(
  chain: Plugin<{ seen: string[] }>[],
  query: string,
  variableValues?: Record<string, unknown>,
) {
  type Ctx = { seen: string[] };
  const run = async (subscribe: (args: ExecutionArgs) => Promise<unknown>) => {
    const contextValue: Ctx = { seen: [] };
    const results: unknown[] = [];
    let thrown: string | undefined;
    const result = await subscribe({ schema: ticking, document: parse(query), variableValues, contextValue });
    if (result && typeof result === "object" && Symbol.asyncIterator in result) {
      try {
        for await (const r of result as AsyncIterable<ExecutionResult>)
          results.push(JSON.parse(JSON.stringify(r)));
      } catch (err) {
        thrown = (err as Error).message;
      }
    } else results.push(JSON.parse(JSON.stringify(result)));
    return { results, thrown, seen: contextValue.seen };
  };
  return {
    ours: await run((args) => chainSubscribe(chain)(args)),
    envelop: await run(
      async (args) => (await envelopChain(chain)(args.contextValue as Ctx).subscribe(args)) as unknown,
    ),
  };
}

describe("chainSubscribe", () => {
  it("runs the hooks, then the stream's results through every onNext in order and its end through every onEnd, as envelop does", async () => {
    const { ours, envelop } = await subscribedBothWays(
      subscribeChain({ replaceNext: true }),
      "subscription { tick }",
    );
    expect(ours).toEqual({
      results: [{ data: { tick: 10 } }, { data: { tick: 20 } }],
      thrown: undefined,
      seen: [
        "subscribe first",
        "subscribe second",
        "result first stream",
        "result second stream",
        "next first 1",
        "next second 1",
        "next first 2",
        "next second 2",
        "end first",
        "end second",
      ],
    });
    expect(ours).toEqual(envelop);
  });

  it("a hook's result stops the later hooks and the subscription; the earlier hooks' result hooks still run", async () => {
    const { ours, envelop } = await subscribedBothWays(
      subscribeChain({ stopAt: "first" }),
      "subscription { tick }",
    );
    expect(ours).toEqual({
      results: [{ data: { tick: -1 } }],
      thrown: undefined,
      seen: ["subscribe first", "result first single"],
    });
    expect(ours).toEqual(envelop);
  });

  it("an error the source throws passes every onSubscribeError, which may replace it, and is thrown", async () => {
    const { ours, envelop } = await subscribedBothWays(
      subscribeChain({ replaceError: true }),
      "subscription { tick(n: 1, fail: true) }",
    );
    expect(ours.results).toEqual([{ data: { tick: 1 } }]);
    expect(ours.thrown).toBe("replaced by first");
    expect(ours.seen).toContain("error first the source failed");
    expect(ours.seen).toContain("error second replaced by first");
    expect(ours).toEqual(envelop);
  });

  it("arguments that do not coerce are refused as yoga's interpreter refuses them (BAD_USER_INPUT)", async () => {
    const { ours, envelop } = await subscribedBothWays(
      subscribeChain({}),
      "subscription($n: Int) { tick(n: $n) }",
      { n: "three" },
    );
    expect(ours.results).toEqual([
      {
        errors: [
          {
            message:
              'Variable "$n" got invalid value "three"; Int cannot represent non-integer value: "three"',
            locations: [{ line: 1, column: 14 }],
            extensions: { http: { status: 400 }, code: "BAD_USER_INPUT" },
          },
        ],
      },
    ]);
    expect(ours).toEqual(envelop);
  });
});

/** graphqlChain over a document cache, with what its parse and validate rules read (nothing runs). */
function serviceChain() {
  const counter = { inc() {} };
  return graphqlChain({
    limits: { maxDocumentBytes: 65_536, maxDepth: 10, maxCost: 1000, maxAliases: 100, maxNodes: 100_000 },
    writeLimits: { maxBatchSize: 1, requestEventsMaxBytes: 1 },
    model: () => {
      throw new Error("not read when validating");
    },
    documents: createDocumentCache(1 << 20),
    estimate: () => 0,
    heavy: {},
    guard: {},
    metrics: { graphqlOperations: counter, graphqlDocumentsParsed: counter, graphqlExecutions: counter },
    maskError: (error: unknown) => error as Error,
  } as never) as Plugin[];
}

describe("the chain's validation results (graphqlChain)", () => {
  /** The chain with a first plugin that records the errors graphql-js's validation returns. */
  function recorded() {
    const fromGraphqlJs: GraphQLError[] = [];
    const recorder: Plugin = {
      onValidate({ validateFn, setValidationFn }) {
        setValidationFn((...args) => {
          const errors = validateFn(...args);
          fromGraphqlJs.push(...errors);
          return errors;
        });
      },
    };
    const chain = [recorder, ...serviceChain()];
    return { chain, documents: chainDocuments(chain), fromGraphqlJs };
  }

  it("are new errors with a code and a status, kept and answered again; graphql-js's are not changed", () => {
    const { chain, documents, fromGraphqlJs } = recorded();
    const document = documents.parse({}, "{ c }");
    const errors = documents.validate({}, twoFields, document);
    expect(errors.map((e) => e.toJSON())).toEqual([
      {
        message: 'Cannot query field "c" on type "Query". Did you mean "a" or "b"?',
        locations: [{ line: 1, column: 3 }],
        extensions: { code: "GRAPHQL_VALIDATION_FAILED", status: 400 },
      },
    ]);
    expect(fromGraphqlJs).toHaveLength(1);
    expect(errors[0]).not.toBe(fromGraphqlJs[0]);
    expect(Object.keys(fromGraphqlJs[0]!.extensions)).toEqual([]);
    // Kept: the same list again, not validated again, by either runner.
    expect(documents.validate({}, twoFields, document)).toBe(errors);
    expect(envelopChain(chain)({}).validate(twoFields, document)).toBe(errors);
    expect(fromGraphqlJs).toHaveLength(1);
    // A valid document: no errors.
    expect(documents.validate({}, twoFields, documents.parse({}, "{ a }"))).toEqual([]);
  });

  it("graphql-js's abort of its field-merge check is the QUERY_TOO_COMPLEX refusal naming its limit; its module-wide error is not changed", () => {
    const { documents, fromGraphqlJs } = recorded();
    const errors = documents.validate({}, twoFields, documents.parse({}, `{ ${"a ".repeat(900)} }`));
    expect(errors.map((e) => e.toJSON())).toEqual([
      {
        message:
          "The document repeats fields of one response name too often: checking that they merge takes more than 500000 steps, the most validation takes. Select each field once per selection set.",
        extensions: { code: "QUERY_TOO_COMPLEX", status: 400, details: { max_field_merge_steps: 500_000 } },
      },
    ]);
    expect(fromGraphqlJs.map((e) => e.message)).toEqual(["Validation aborted."]);
    expect(Object.keys(fromGraphqlJs[0]!.extensions)).toEqual([]);
  });
});
