// What every command of `npm run` that works on the service's data shares: the configuration
// read, the services opened (a quiet logger), the command's body run, a refusal of the API
// (ApiError) printed as its code, message and the fields it names, the services closed, and the
// exit code given to the shell. A failure to start is told by `describeStartupError`.
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
