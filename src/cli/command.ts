// What every command of `npm run` shares: its command line read before anything is opened
// (`readCommandLine`: --help and -h, unknown options and a wrong number of arguments refused with
// exit 2); for those that work on the service's data, the configuration read, the services
// opened (a quiet logger), the command's body run, a refusal of the API (ApiError) printed as its
// code, message and the fields it names, the services closed, and the exit code given to the
// shell. A failure to start is told by `describeStartupError`.
import { loadConfig } from "../config.ts";
import { ApiError } from "../errors.ts";
import { createLogger } from "../logger.ts";
import { openServices, type Services } from "../services.ts";
import { describeStartupError } from "./startup-error.ts";

/** A command's body: its exit code (0 done, 1 refused, 2 misused). */
export type CommandBody = (services: Services) => Promise<number>;

/** The lines a refusal prints: its code and message, then each field it names. */
export function refusalLines(err: ApiError): string[] {
  return [`${err.code}: ${err.message}`, ...(err.errors ?? []).map((e) => `  - ${e.field}: ${e.message}`)];
}

/** Opens the services, runs `body` on them, closes them; refusals print and give 1. */
export async function withServices(
  body: CommandBody,
  /** Settings the command takes unless the environment names them (e.g. a longer statement bound). */
  defaults: Record<string, string> = {},
): Promise<number> {
  const services = await openServices(loadConfig({ ...defaults, ...process.env }), {
    logger: createLogger("warn"),
  });
  try {
    return await body(services);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    for (const line of refusalLines(err)) console.error(line);
    return 1;
  } finally {
    await services.close();
  }
}

/** Runs a command to its end and exits the process with its code (1 when it could not start). */
export function runCommand(command: () => Promise<number>): void {
  command()
    .then((code) => process.exit(code))
    .catch((err: unknown) => {
      console.error(describeStartupError(err));
      process.exit(1);
    });
}

/**
 * What a command takes on its command line: `--help` and `-h` print `usage` and `help` (exit 0);
 * any other option not listed, or a number of arguments outside `args`, is refused with one line
 * naming it and the usage (exit 2). Both happen before anything is opened: nothing is touched.
 */
export interface CommandLineSpec {
  /** `usage: npm run NAME -- …`, one line. */
  usage: string;
  /** What the command does, its arguments and options, printed after the usage by --help. */
  help: readonly string[];
  /** Options without a value (`--reset`). */
  flags?: readonly string[];
  /** Options with one (`--format` given as `--format=csv`), as the help names them (`--format=csv|json`). */
  valued?: readonly string[];
  /** The arguments (not options) it takes: a number, or the least and the most. */
  args: number | readonly [number, number];
  /** Arguments set aside from `args` and handed back as they are (the export's `name=value`). */
  isParameter?: (arg: string) => boolean;
  /** Added to an unknown option's line (e.g. where list parameters go). */
  optionHint?: string;
}

/** A command line read: its arguments, the flags given, each valued option's values, the parameters. */
export interface CommandLine {
  args: string[];
  flags: Set<string>;
  values: Map<string, string[]>;
  parameters: string[];
}

/** The options of `spec` as a refusal names them: "--reset and --help". */
function optionList(spec: CommandLineSpec): string {
  const all = [...(spec.flags ?? []), ...(spec.valued ?? []), "--help"];
  return all.length === 1
    ? "The only option is --help"
    : `The options are ${all.slice(0, -1).join(", ")} and --help`;
}

/**
 * Reads `argv` by `spec`: the command line, or the exit code once help or a refusal was printed
 * (0 for --help/-h, 2 for a misuse). `--` ends the options (an argument may then start with `-`).
 */
export function readCommandLine(spec: CommandLineSpec, argv: readonly string[]): CommandLine | number {
  const end = argv.indexOf("--");
  const options = end < 0 ? argv : argv.slice(0, end);
  if (options.includes("--help") || options.includes("-h")) {
    console.log([spec.usage, ...spec.help].join("\n"));
    return 0;
  }
  const refuse = (line: string): number => {
    console.error(line);
    console.error(spec.usage);
    return 2;
  };
  const line: CommandLine = { args: [], flags: new Set(), values: new Map(), parameters: [] };
  const valuedNames = (spec.valued ?? []).map((v) => v.replace(/=.*$/, ""));
  for (const [i, arg] of argv.entries()) {
    if (end >= 0 && i === end) continue;
    const option = (end < 0 || i < end) && arg.startsWith("-") && arg !== "-";
    if (option) {
      const name = arg.replace(/=.*$/s, "");
      if (spec.flags?.includes(arg)) {
        line.flags.add(arg);
        continue;
      }
      if (valuedNames.includes(name)) {
        if (arg === name) return refuse(`The option ${name} takes a value: ${name}=….`);
        line.values.set(name, [...(line.values.get(name) ?? []), arg.slice(name.length + 1)]);
        continue;
      }
      const shown = arg.length > 60 ? `${arg.slice(0, 60)}…` : arg;
      return refuse(
        `Unknown option ${shown}. ${optionList(spec)}${spec.optionHint ? `; ${spec.optionHint}` : ""}.`,
      );
    }
    if (spec.isParameter?.(arg)) line.parameters.push(arg);
    else line.args.push(arg);
  }
  const [least, most] = typeof spec.args === "number" ? [spec.args, spec.args] : spec.args;
  const n = line.args.length;
  if (n < least || n > most) {
    const count = (k: number) => (k === 0 ? "no argument" : k === 1 ? "1 argument" : `${k} arguments`);
    const wanted =
      least === most
        ? count(least)
        : least === 0
          ? `at most ${count(most)}`
          : `${least} to ${most} arguments`;
    const given = n ? `: ${line.args.map((a) => (a.length > 60 ? `${a.slice(0, 60)}…` : a)).join(" ")}` : "";
    return refuse(`Expected ${wanted}, got ${n}${given}.`);
  }
  return line;
}
