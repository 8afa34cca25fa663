// `npm run tenant:move -- <tenant> <profile|main>`: moves a tenant's rows to another database
// (decisions.md §18; src/tenant-move.ts). Its writes are refused with 503 TENANT_MOVING while the
// rows are copied and checked, its reads go on; then it switches and the old rows are removed.
// It has no dry run: an unknown option (`--dry-run`) is refused before any database is opened.
// It sees only its own configuration, not the running processes': every serving process must have
// the target profile configured (and have been restarted with it) before the move, else the tenant
// gets 503 on every request there (said by --help and the README).
import { moveTenant, TenantMoveError } from "../tenant-move.ts";
import { readCommandLine, runCommand, withServices } from "./command.ts";

const SPEC = {
  usage: "usage: npm run tenant:move -- TENANT PROFILE|main",
  help: [
    "Moves a tenant's records, outbox, webhooks, search rows, history and sequences to another",
    "database: a profile (DATABASE_URL_<PROFILE>) or main (DATABASE_URL). Its writes get 503",
    "TENANT_MOVING with Retry-After while its rows are copied and checked (its reads go on), then it",
    "switches (every process is told through the database) and the old rows are removed. The copy may",
    "take up to 6 hours (STATEMENT_TIMEOUT_MS for another bound). There is no dry run.",
    "Before moving a tenant to a profile, configure that profile (DATABASE_URL_<PROFILE>) in EVERY",
    "process serving the service and restart them: this command sees only its own environment, and",
    "a process without the profile answers the moved tenant 503 DATABASE_UNAVAILABLE until it is",
    "reconfigured and restarted.",
    "Arguments: TENANT, a TB_TENANT.TENANT_ID; PROFILE|main, the target (case-insensitive).",
    "Options: --help (-h), this text.",
    "Exit: 0 moved; 1 refused (unknown tenant or profile: nothing changed) or failed (run it again to",
    "finish); 2 misused (an unknown option or not two arguments: refused before any database is opened).",
  ],
  args: 2,
} as const;

async function run(argv: string[]): Promise<number> {
  const line = readCommandLine(SPEC, argv);
  if (typeof line === "number") return line;
  const [tenant, target] = line.args as [string, string];
  // The copy is one transaction on each side, as long as the tenant is large: bounded by 6 hours
  // rather than a request's 30 s, unless STATEMENT_TIMEOUT_MS says otherwise.
  return withServices(
    async (services) => {
      try {
        const result = await moveTenant(services, tenant, target, { onStep: (s) => console.log(`- ${s}`) });
        const copied = Object.entries(result.copied)
          .filter(([, n]) => n > 0)
          .map(([table, n]) => `${table} ${n}`);
        const replaced = Object.entries(result.replaced).map(([table, n]) => `${table} ${n}`);
        console.log(
          [
            `Moved tenant ${result.tenant} from ${result.from ?? "main"} to ${result.to ?? "main"}.`,
            `  rows copied: ${copied.join(", ") || "none"}`,
            ...(replaced.length
              ? [
                  `  rows of ${result.tenant} the target already held, replaced by the copy: ${replaced.join(", ")}`,
                ]
              : []),
            `  unpublished events moved: ${result.eventsMoved}`,
          ].join("\n"),
        );
        return 0;
      } catch (err) {
        if (!(err instanceof TenantMoveError)) throw err;
        console.error(err.message);
        return 1;
      }
    },
    { STATEMENT_TIMEOUT_MS: String(6 * 3600_000) },
  );
}

runCommand(() => run(process.argv.slice(2)));
