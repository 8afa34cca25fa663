// The heap GraphQL schemas per access profile hold (issue 37: several profiles within twice one
// schema's memory). A generated metadata in memory, no database: BENCH_DIMENSIONS dimensions
// (1,000 by default) of 31 fields (an id, 24 strings and decimals, a key to the dimension before
// it, 5 audit fields) in modules of 10 under a menu tree; each module's dimensions form a chain of
// relations and each module's first one points at the first of module 0 (a master, as customers
// are), so what a caller reads of several modules is one component. Every 10th dimension has a
// field of COD_UTENTE 2 (hidden from peso 3). The schema cache the server uses builds, in order:
//   admin    peso 1, every grant                           (the full schema, npm run schema:print's)
//   manager  peso 2, reads everything, writes half the modules
//   auditor  peso 3, reads everything, writes nothing
//   clerk    peso 3, reads half the modules, writes nothing
// and prints the live heap after full collections with the admin's schema alone and with all four,
// each build's time, and what the cache shares (inputs, components).
//
//   npx tsx bench/schema-profiles.ts            (BENCH_DIMENSIONS=200 for a quick look)
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { graphqlResolvers } from "../src/graphql/resolve.ts";
import { buildModel } from "../src/metadata/build.ts";
import { createSchemaCache, type ProfileInputs } from "../src/schema/cache.ts";
import type { Grant, MetadataModel, MetadataRows, Operation } from "../src/types.ts";

const DIMENSIONS = Number(process.env.BENCH_DIMENSIONS ?? 1000);
const MODULE_SIZE = 10;
const DECLARED_FIELDS = 25;

setFlagsFromString("--expose-gc");
const gc = runInNewContext("gc") as () => void;

/** The live heap in MB after full collections. */
function heapMB(): number {
  for (let i = 0; i < 3; i++) gc();
  return process.memoryUsage().heapUsed / 2 ** 20;
}

const code = (d: number) => `D${String(d).padStart(4, "0")}`;

function generatedMetadata(): {
  rows: MetadataRows;
  modules: Array<{ code: string; nleft: number; nright: number }>;
} {
  const rows: MetadataRows = {
    TB_DIM: [],
    TB_VAR: [],
    TB_COST: [],
    TB_OBJECT: [],
    TB_MENU: [],
    TB_SORT: [],
    TB_DOCUMENT: [],
  };
  const modules: Array<{ code: string; nleft: number; nright: number }> = [];
  let n = 1;
  const root = { COD_MENU: "all", NLEFT: n++, NRIGHT: 0, DESC_MENU: "All", COD_DIM: null };
  rows.TB_MENU.push(root);
  for (let m = 0; m * MODULE_SIZE < DIMENSIONS; m++) {
    const module = { COD_MENU: `mod-${m}`, NLEFT: n++, NRIGHT: 0, DESC_MENU: `Module ${m}`, COD_DIM: null };
    rows.TB_MENU.push(module);
    for (let d = m * MODULE_SIZE; d < Math.min(DIMENSIONS, (m + 1) * MODULE_SIZE); d++) {
      const dim = code(d);
      rows.TB_DIM.push({
        COD_DIM: dim,
        DESC_DIM: `Dimension ${d}`,
        TABLE_NAME: `TB_ANAG_${dim}00`,
        ID_FIELD: "ID",
      });
      rows.TB_VAR.push({ COD_DIM: dim, NUM_VAR: 1, COD_VAR: "ID", DATA_TYPE: "INTEGER" });
      for (let v = 2; v <= DECLARED_FIELDS; v++) {
        rows.TB_VAR.push({
          COD_DIM: dim,
          NUM_VAR: v,
          COD_VAR: `F${v}`,
          DESC_VAR: `Field ${v}`,
          DATA_TYPE: v % 3 ? "STRING" : "DECIMAL",
          LENGTH: 50,
        });
      }
      if (d % 10 === 0) {
        rows.TB_COST.push({ COD_DIM: dim, NUM_COST: 1, COD_VAR: "F2", COD_ON_OFF: "LDRNM", COD_UTENTE: 2 });
      }
      // The dimension before it in its module, or module 0's first (the master) for a module's first.
      const parent = d % MODULE_SIZE ? d - 1 : d === 0 ? null : 0;
      if (parent !== null) {
        rows.TB_VAR.push({
          COD_DIM: dim,
          NUM_VAR: DECLARED_FIELDS + 1,
          COD_VAR: "PARENT_ID",
          DATA_TYPE: "INTEGER",
        });
        rows.TB_OBJECT.push({
          COD_DIM: dim,
          COD_VAR: "PARENT_ID",
          COD_DIM_OBJ: code(parent),
          COD_VAR_OBJ: "ID",
        });
      }
      rows.TB_MENU.push({ COD_MENU: `d-${d}`, NLEFT: n++, NRIGHT: n++, DESC_MENU: dim, COD_DIM: dim });
    }
    module.NRIGHT = n++;
    modules.push({ code: module.COD_MENU, nleft: module.NLEFT, nright: module.NRIGHT });
  }
  root.NRIGHT = n++;
  return { rows, modules };
}

const grant = (
  node: { code: string; nleft: number; nright: number },
  operations: Operation[],
  level: number,
): Grant => ({
  COD_MENU: node.code,
  NLEFT: node.nleft,
  NRIGHT: node.nright,
  OPERATIONS: operations,
  LEVEL: level,
});

async function main() {
  const { rows, modules } = generatedMetadata();
  const model: MetadataModel = buildModel(rows, 1);
  const root = { code: "all", nleft: 1, nright: rows.TB_MENU[0]!.NRIGHT };
  const half = modules.slice(0, Math.ceil(modules.length / 2));
  const profiles: Array<[string, ProfileInputs]> = [
    ["admin", { peso: 1, grants: [grant(root, ["read", "write", "force_delete"], 4)] }],
    [
      "manager",
      { peso: 2, grants: [grant(root, ["read"], 1), ...half.map((m) => grant(m, ["read", "write"], 3))] },
    ],
    ["auditor", { peso: 3, grants: [grant(root, ["read"], 1)] }],
    ["clerk", { peso: 3, grants: half.map((m) => grant(m, ["read"], 1)) }],
  ];
  const fields = [...model.dimensions.values()][1]!.fields.length;
  console.log(`${model.dimensions.size} dimensions × ${fields} fields, ${rows.TB_MENU.length} menu nodes`);

  const cache = createSchemaCache({ current: () => model }, graphqlResolvers());
  const before = heapMB();
  const figures: Array<{ name: string; ms: number; heap: number }> = [];
  for (const [name, inputs] of profiles) {
    const started = performance.now();
    const schema = cache.forCaller(inputs);
    const ms = performance.now() - started;
    const heap = heapMB() - before;
    figures.push({ name, ms, heap });
    const query = Object.keys(schema.getQueryType()!.getFields()).length;
    const mutation = Object.keys(schema.getMutationType()?.getFields() ?? {}).length;
    const stats = cache.stats();
    console.log(
      `${name.padEnd(8)} built in ${ms.toFixed(0).padStart(5)} ms; ${String(query).padStart(5)} query and ${String(mutation).padStart(5)} mutation fields; heap of the schemas so far ${heap.toFixed(1)} MB (inputs kept ${stats.inputs}, components ${stats.components} of ${stats.componentDimensions} dimensions)`,
    );
  }
  const one = figures[0]!.heap;
  const four = figures.at(-1)!.heap;
  console.log(
    `one profile ${one.toFixed(1)} MB, four profiles ${four.toFixed(1)} MB: ${(four / one).toFixed(2)}×`,
  );
  // The schemas stay reachable until here.
  cache.close();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
