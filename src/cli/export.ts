// `npm run export -- TENANT DIM [--format=csv|ndjson|json] [LIST PARAMETERS…]`: writes every record
// of a tenant's dimension to standard output, as GET /api/v4/core/{dim}/export answers it (the same
// resolver and formats, decisions §20), read as the system: every field a list shows (L), the
// dimension's own security area as source. List parameters as `name=value`
// (`filter[CITY_ID]=MI`, `sort=-NAME`, `$fields=NAME,EMAIL`, `$filter=…`). Standard output's pace
// sets the reads' (a pipe into a slow reader holds one page at a time).
import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { parseListParams } from "../query/rest-params.ts";
import { exportRecords } from "../resolvers/read/export.ts";
import { createReadContext } from "../resolvers/read/index.ts";
import { EXPORT_FORMATS, type ExportFormat, exportChunks } from "../rest/response/export-formats.ts";
import { inScope, type MetadataModel, type RequestContext } from "../types.ts";
import { runCommand, withServices } from "./command.ts";

const USAGE = "usage: npm run export -- TENANT DIM [--format=csv|ndjson|json] [name=value …]";

/** The system reading a tenant's dimension through the menu node that serves it. */
function systemContext(model: MetadataModel, tenantId: string, dim: string): RequestContext | null {
  const node = model.menu.find((n) => n.dim === dim);
  if (!node) return null;
  const grant = {
    COD_MENU: node.code,
    NLEFT: node.nleft,
    NRIGHT: node.nright,
    OPERATIONS: ["read" as const],
    LEVEL: 4,
  };
  const caller = {
    principal: {
      userId: "system:export",
      tenantId,
      sessionId: randomUUID(),
      peso: 1,
      centroDett: null,
      ambiente: null,
      lingua: null,
      grants: [grant],
    },
    requestId: randomUUID(),
    now: () => new Date(),
  };
  return inScope(caller, node.code, null);
}

async function run(argv: string[]): Promise<number> {
  const positional = argv.filter((a) => !a.startsWith("--") && !a.includes("="));
  const format = (argv.find((a) => a.startsWith("--format="))?.slice(9) ?? "csv") as ExportFormat;
  if (positional.length !== 2 || !EXPORT_FORMATS.includes(format)) {
    console.error(USAGE);
    return 2;
  }
  const [tenantId, dim] = positional as [string, string];
  const params: Record<string, string> = {};
  for (const a of argv.filter((a) => !a.startsWith("--") && a.includes("="))) {
    const at = a.indexOf("=");
    params[a.slice(0, at)] = a.slice(at + 1);
  }
  return withServices(async (services) => {
    const tenant = await services.db.query(`SELECT 1 FROM "TB_TENANT" WHERE "TENANT_ID" = $1`, [tenantId]);
    if (!tenant.rows.length) {
      console.error(`No tenant ${tenantId}.`);
      return 1;
    }
    const model = services.metadata.current();
    const ctx = systemContext(model, tenantId, dim);
    if (!ctx) {
      console.error(`No dimension ${dim} with a menu node (TB_MENU.COD_DIM) to read it through.`);
      return 1;
    }
    // The tenant's records are in its database (decisions.md §18).
    const rc = createReadContext(
      { db: services.forTenant(tenantId).readDb, metadata: services.metadata },
      ctx,
    );
    const rows = exportRecords(rc, dim, parseListParams(params));
    await pipeline(Readable.from(exportChunks(format, rows.columns, rows.pages)), process.stdout);
    return 0;
  });
}

runCommand(() => run(process.argv.slice(2)));
