// The chain's own runner of its execute hooks (chainExecute, src/graphql/chain.ts), which the plain
// POST and WebSocket transports run queries and mutations with: the same order, stops, replaced
// execute functions and replaced results as envelop's orchestrator gives the same plugins (which
// yoga's transport runs them with), and a refusal of hooks it does not run.
import type { Plugin } from "@envelop/core";
import { buildSchema, type ExecutionArgs, type ExecutionResult, parse } from "graphql";
import { describe, expect, it } from "vitest";
import { chainExecute, envelopChain } from "../../src/graphql/chain.ts";

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
    expect(() => chainExecute([building])).toThrow("chainExecute does not run the hooks onContextBuilding");
  });
});
