// `npm run tenant:move -- <tenant> <profile|main>`: moves a tenant's rows to another database
// (decisions.md §18; src/tenant-move.ts). Its writes are refused with 503 TENANT_MOVING while the
// rows are copied and checked, its reads go on; then it switches and the old rows are removed.
import { moveTenant, TenantMoveError } from "../tenant-move.ts";
import { runCommand, withServices } from "./command.ts";

async function run(argv: string[]): Promise<number> {
  const args = argv.filter((a) => !a.startsWith("--"));
  if (args.length !== 2) {
    console.error("usage: npm run tenant:move -- <tenant> <profile|main>");
    return 2;
  }
  const [tenant, target] = args as [string, string];
  // The copy is one transaction on each side, as long as the tenant is large: bounded by 6 hours
  // rather than a request's 30 s, unless STATEMENT_TIMEOUT_MS says otherwise.
  return withServices(
    async (services) => {
      try {
        const result = await moveTenant(services, tenant, target, { onStep: (s) => console.log(`- ${s}`) });
        const copied = Object.entries(result.copied)
          .filter(([, n]) => n > 0)
          .map(([table, n]) => `${table} ${n}`);
        console.log(
          [
            `Moved tenant ${result.tenant} from ${result.from ?? "main"} to ${result.to ?? "main"}.`,
            `  rows copied: ${copied.join(", ") || "none"}`,
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
