// What `npm start`, `npm run migrate` and `npm run import` print when they cannot start: one line
// that says what to do for the failures a newcomer meets, the stack for anything else.
import { ConfigError } from "../config.ts";
import { DatabaseInUseError } from "../db/database.ts";
import { UnknownProfileError } from "../db/profiles.ts";

const DATABASE_UNREACHABLE: Record<string, string> = {
  ECONNREFUSED: "nothing listens there: is PostgreSQL running?",
  ENOTFOUND: "the host name does not resolve",
  EAI_AGAIN: "the host name could not be resolved now",
  ETIMEDOUT: "the connection timed out",
  "3D000": "the database does not exist: create it first (createdb NAME)",
  "28P01": "the password was refused",
  "28000": "the user may not connect",
  ECONNRESET:
    "the server there reset the connection: is that PostgreSQL's port (5432 by default), not another service's?",
};

/**
 * pg's own words for a connection that ended before PostgreSQL's greeting (no code): something
 * other than PostgreSQL listens there (it closed, or never answered), or the host drops it.
 */
const DATABASE_ENDED: Array<[RegExp, string]> = [
  [
    /^Connection terminated due to connection timeout$/,
    "nothing answered as PostgreSQL does in time: is that PostgreSQL's host and port (5432 by default)?",
  ],
  [
    /^Connection terminated unexpectedly$/,
    "the server there closed the connection: is that PostgreSQL's port (5432 by default), not another service's?",
  ],
];

/** The HTTP server's own failures to listen, by code: which variable to change, and how. */
const LISTEN_FAILURES: Record<string, { variable: "HOST" | "PORT"; advice: string }> = {
  EADDRINUSE: {
    variable: "PORT",
    advice: "another process listens on that port: stop it, or set PORT to a free one",
  },
  EACCES: {
    variable: "PORT",
    advice:
      "this process may not listen on that port (below 1024 needs privileges): set PORT to 1024 or above",
  },
  EADDRNOTAVAIL: {
    variable: "HOST",
    advice:
      "no network interface of this machine has that address: set HOST to one of its addresses (0.0.0.0: all of them)",
  },
  ENOTFOUND: {
    variable: "HOST",
    advice:
      "the host name does not resolve: set HOST to an address or name of this machine (0.0.0.0: all of them)",
  },
  EAI_AGAIN: {
    variable: "HOST",
    advice:
      "the host name could not be resolved now: set HOST to an address of this machine (0.0.0.0: all of them)",
  },
};

/** `advice` as the end of a sentence: a full stop unless it ends in one already (or in "?"). */
const sentence = (advice: string) => (/[.?!]$/.test(advice) ? advice : `${advice}.`);

/**
 * Whether `err` is the HTTP server's failure to listen on HOST and PORT: a `listen` system call's
 * error, or the look-up of HOST's name (a database's host name fails the same way: its name tells).
 */
function listenFailure(err: unknown, env: Record<string, string | undefined>): boolean {
  const e = err as { code?: unknown; syscall?: unknown; hostname?: unknown } | null;
  if (typeof e?.code !== "string" || !(e.code in LISTEN_FAILURES)) return false;
  if (e.syscall === "listen") return true;
  const host = (env.HOST ?? "").trim();
  return e.syscall === "getaddrinfo" && host !== "" && e.hostname === host;
}

export function describeStartupError(
  err: unknown,
  env: Record<string, string | undefined> = process.env,
): string {
  if (err instanceof ConfigError || err instanceof DatabaseInUseError || err instanceof UnknownProfileError)
    return err.message;
  const code = (err as { code?: unknown })?.code;
  const detail = err instanceof Error ? err.message : String(err);
  if (typeof code === "string" && listenFailure(err, env)) {
    const { variable, advice } = LISTEN_FAILURES[code]!;
    const host = (env.HOST ?? "").trim() || "0.0.0.0";
    const port = (env.PORT ?? "").trim() || "8080";
    return `Cannot listen on ${variable === "PORT" ? `PORT ${port} (HOST ${host})` : `HOST ${host} (PORT ${port})`}: ${detail}; ${sentence(advice)}`;
  }
  if (typeof code === "string" && code in DATABASE_UNREACHABLE) {
    return `Cannot use the database of DATABASE_URL (${detail}): ${sentence(DATABASE_UNREACHABLE[code]!)}`;
  }
  const ended = err instanceof Error && DATABASE_ENDED.find(([words]) => words.test(err.message));
  if (ended) return `Cannot use the database of DATABASE_URL (${detail}): ${sentence(ended[1])}`;
  return err instanceof Error ? (err.stack ?? err.message) : String(err);
}
