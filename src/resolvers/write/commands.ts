// Commands (decisions.md §15): named operations on a record of a dimension, run through the write
// pipeline (authorization, rules, audit, outbox) and answered like any write. Built in for every
// dimension: `process` (N or M → P), `complete` (P → M), `restore` (C → M). Further commands are
// registered in code, per dimension, with a zod schema for their `data` (docs/commands.md).
import { z } from "zod";
import { NotFoundError, ValidationError } from "../../errors.ts";
import type { RequestContext, WriteOutcome } from "../../types.ts";
import { updateOne } from "./operations.ts";
import type { WriteDeps, WriteOptions } from "./pipeline.ts";

export interface CommandInput<D = Record<string, unknown>> {
  deps: WriteDeps;
  request: RequestContext;
  dim: string;
  id: unknown;
  data: D;
  /**
   * The options a command's writes pass on (updateOne's, deleteOne's…): they record the write in
   * the record's history as a command (decisions.md §19).
   */
  opts: WriteOptions;
}

export interface CommandDefinition<D = Record<string, unknown>> {
  name: string;
  description: string;
  /** Validates and shapes the body's `data` (400 INVALID_FIELD_VALUE naming the member otherwise). */
  input: z.ZodType<D>;
  run(input: CommandInput<D>): Promise<WriteOutcome>;
}

export interface CommandRegistry {
  /** Registers a command for one dimension, or for every dimension with "*". */
  register<D>(dim: string, command: CommandDefinition<D>): void;
  find(dim: string, name: string): CommandDefinition | undefined;
  names(dim: string): string[];
}

const ANY = "*";
const NAME = /^[a-z][a-z0-9_-]{0,59}$/;

/** A state move as a PATCH with TREC, allowed only from `from`. */
function stateMove(name: string, description: string, from: ("N" | "M" | "P" | "C")[], to: "P" | "M") {
  return {
    name,
    description,
    input: z.record(z.string(), z.unknown()),
    run: ({ deps, request, dim, id, data, opts }: CommandInput) => {
      // The command is the move: a TREC in its data naming another state would be overridden.
      if (data.TREC !== undefined && data.TREC !== to) {
        throw new ValidationError(
          "INVALID_STATE_TRANSITION",
          `The ${name} command moves the record to ${to}; its data names TREC ${JSON.stringify(data.TREC)?.slice(0, 20)}. Leave TREC out of a command's data (PATCH the record to move it otherwise).`,
          { field: "TREC", details: { command: name, to } },
        );
      }
      return updateOne(deps, request, dim, id, { ...data, TREC: to }, "patch", opts, from);
    },
  } satisfies CommandDefinition;
}

export const BUILT_IN_COMMANDS: readonly CommandDefinition[] = [
  stateMove(
    "process",
    "Enters processing: N or M → P (data may change fields as a PATCH would).",
    ["N", "M"],
    "P",
  ),
  stateMove("complete", "Completes processing: P → M.", ["P"], "M"),
  stateMove("restore", "Restores a cancelled record: C → M.", ["C"], "M"),
];

export function createCommandRegistry(): CommandRegistry {
  const byDim = new Map<string, Map<string, CommandDefinition>>();
  const registry: CommandRegistry = {
    register(dim, command) {
      if (!NAME.test(command.name)) throw new Error(`command name ${command.name} is not [a-z][a-z0-9_-]*`);
      const commands = byDim.get(dim) ?? new Map<string, CommandDefinition>();
      byDim.set(dim, commands);
      commands.set(command.name, command as unknown as CommandDefinition);
    },
    find(dim, name) {
      return byDim.get(dim)?.get(name) ?? byDim.get(ANY)?.get(name);
    },
    names(dim) {
      return [...new Set([...(byDim.get(ANY)?.keys() ?? []), ...(byDim.get(dim)?.keys() ?? [])])].sort();
    },
  };
  for (const c of BUILT_IN_COMMANDS) registry.register(ANY, c);
  return registry;
}

/** Runs `name` on record `id` of `dim`: 404 COMMAND_NOT_FOUND for a name not registered there. */
export async function runCommand(
  deps: WriteDeps & { commands: CommandRegistry },
  request: RequestContext,
  dim: string,
  name: string,
  body: { id?: unknown; data?: unknown },
): Promise<WriteOutcome> {
  const command = deps.commands.find(dim, name);
  if (!command) {
    throw new NotFoundError("COMMAND_NOT_FOUND", `No command ${name.slice(0, 60)} for ${dim.slice(0, 30)}.`, {
      details: { commands: deps.commands.names(dim) },
    });
  }
  if (body.id === undefined || body.id === null || body.id === "") {
    throw new ValidationError("MISSING_PARAMETER", "The body must carry the record's id.", { field: "id" });
  }
  const parsed = command.input.safeParse(body.data ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const field = String(issue.path[0] ?? "data");
    throw new ValidationError("INVALID_FIELD_VALUE", `${field}: ${issue.message}`, { field });
  }
  return command.run({ deps, request, dim, id: body.id, data: parsed.data, opts: { operation: "command" } });
}
