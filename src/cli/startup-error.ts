// What `npm start`, `npm run migrate` and `npm run import` print when they cannot start: one line
// that says what to do for the failures a newcomer meets, the stack for anything else.
import { ConfigError } from "../config.ts";
import { DatabaseInUseError } from "../db/database.ts";
import { UnknownProfileError } from "../db/profiles.ts";

const DATABASE_UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: "nothing listens there: is PostgreSQL running?",
  ENOTFOUND: "the host name does not resolve",
  ETIMEDOUT: "the connection timed out",
  "3D000": "the database does not exist: create it first (createdb NAME)",
  "28P01": "the password was refused",
  "28000": "the user may not connect",
};

export function describeStartupError(err: unknown): string {
  if (err instanceof ConfigError || err instanceof DatabaseInUseError || err instanceof UnknownProfileError)
    return err.message;
  const code = (err as { code?: unknown })?.code;
  if (typeof code === "string" && code in DATABASE_UNREACHABLE) {
    const detail = err instanceof Error ? err.message : String(err);
    return `Cannot use the database of DATABASE_URL (${detail}): ${DATABASE_UNREACHABLE[code]}.`;
  }
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}
