// `npm run export -- TENANT DIM [--format=csv|ndjson|json] [LIST PARAMETERS…]`: writes every record
// of a tenant's dimension to standard output, as GET /api/v4/core/{dim}/export answers it (the same
// resolver, parameters and formats, decisions §20), read as the system: every field a list shows
// (L), every row (the dimension's ROW_SCOPE lifted: all_rows), the dimension's own security area as
// source. List parameters as `name=value` (`filter[CITY_ID]=MI`, `sort=-NAME`, `fields=NAME,CITY_ID`,
// `$filter=…`); what the export route refuses (`$num_rows`, `$offset`, `$expand`…) is refused here
// too, as is an option or a parameter name the command does not know (exit 2, nothing written).
// Standard output's pace sets the reads' (a pipe into a slow reader holds one page at a time).
import { randomUUID } from "node:crypto";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ApiError } from "../errors.ts";
import type { QueryParams } from "../query/rest-params.ts";
import { exportQuery, exportRecords } from "../resolvers/read/export.ts";
import { createReadContext } from "../resolvers/read/index.ts";
import { EXPORT_FORMATS, type ExportFormat, exportChunks } from "../rest/response/export-formats.ts";
import type { ListQuery } from "../query/types.ts";
import { inScope, type MetadataModel, type RequestContext } from "../types.ts";
import { readCommandLine, refusalLines, runCommand, withServices } from "./command.ts";

const SPEC = {
  usage: "usage: npm run export -- TENANT DIM [--format=csv|ndjson|json] [name=value …]",
  help: [
    "Writes every record of the tenant's dimension to standard output, read as the system.",
    "Arguments: TENANT, a TB_TENANT.TENANT_ID; DIM, a dimension's code with a menu node (TB_MENU.COD_DIM).",
    "Options: --format=csv|ndjson|json (csv by default), --help (-h).",
    "List parameters, as name=value: fields (or $fields, $select), sort (or $order), filter[FIELD]…,",
    "$filter, $search, cond_trec, forceListCost. An export has no $num_rows, $offset, $count,",
    "$expand, $group or debug.",
    "Exit: 0 written; 1 refused (no such tenant or dimension); 2 misused (an unknown option or",
    "parameter, not two arguments: refused before the database is opened, nothing written).",
  ],
  valued: ["--format=csv|ndjson|json"],
  args: 2,
  isParameter: (arg: string) => arg.includes("="),
  optionHint: "list parameters go as name=value (fields=NAME,CITY_ID, sort=-NAME, filter[CITY_ID]=MI)",
};

/**
 * Parameter names of a list that do not start with `$` (those the list parser checks itself) nor
 * `filter[`: the others are refused here, where a query string would ignore them.
 */
const PLAIN_PARAMETERS = new Set([
  "fields",
  "format",
  "sort",
  "cond_trec",
  "forceListCost",
  "include",
  "groupBy",
  "aggregate",
  "debug",
]);

interface Invocation {
  tenantId: string;
  dim: string;
  format: ExportFormat;
  query: ListQuery;
}

/** The command line read: what to export, or the exit code once help or a refusal was printed. */
function invocationOf(argv: readonly string[]): Invocation | number {
  const line = readCommandLine(SPEC, argv);
  if (typeof line === "number") return line;
  const refuse = (lines: string[]): number => {
    for (const l of lines) console.error(l);
    return 2;
  };
  const params: Record<string, string | string[]> = {};
  const formats = [...(line.values.get("--format") ?? [])];
  for (const arg of line.parameters) {
    const at = arg.indexOf("=");
    const name = arg.slice(0, at);
    const value = arg.slice(at + 1);
    if (!name.startsWith("$") && !name.startsWith("filter[") && !PLAIN_PARAMETERS.has(name)) {
      return refuse([
        `Unknown parameter ${name.slice(0, 60)}. List parameters are fields, sort, filter[FIELD]…, cond_trec, forceListCost and the $ ones ($fields, $filter, $search, $order…).`,
        SPEC.usage,
      ]);
    }
    if (name === "format") formats.push(value);
    else {
      const held = params[name];
      params[name] = held === undefined ? value : [...(typeof held === "string" ? [held] : held), value];
    }
  }
  if (formats.length > 1) return refuse(["Give the format once (--format=…).", SPEC.usage]);
  const format = (formats[0] ?? "csv").toLowerCase();
  if (!(EXPORT_FORMATS as readonly string[]).includes(format))
    return refuse([`The format is ${EXPORT_FORMATS.join(", ")}; got '${format.slice(0, 20)}'.`, SPEC.usage]);
  let query: ListQuery;
  try {
    query = exportQuery(params as QueryParams);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    return refuse(refusalLines(err));
  }
  const [tenantId, dim] = line.args as [string, string];
  return { tenantId, dim, format: format as ExportFormat, query };
}

/**
 * The system reading a tenant's dimension through the menu node that serves it: every row
 * (all_rows lifts the dimension's ROW_SCOPE, which a system with no unit of its own would otherwise
 * match on none).
 */
function systemContext(model: MetadataModel, tenantId: string, dim: string): RequestContext | null {
  const node = model.menu.find((n) => n.dim === dim);
  if (!node) return null;
  const grant = {
    COD_MENU: node.code,
    NLEFT: node.nleft,
    NRIGHT: node.nright,
    OPERATIONS: ["read" as const, "all_rows" as const],
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
  // Read before the database is opened: a misused command line costs nothing and writes nothing.
  const invocation = invocationOf(argv);
  if (typeof invocation === "number") return invocation;
  const { tenantId, dim, format, query } = invocation;
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
    const rows = exportRecords(rc, dim, query);
    await pipeline(Readable.from(exportChunks(format, rows.columns, rows.pages)), process.stdout);
    return 0;
  });
}

runCommand(() => run(process.argv.slice(2)));
