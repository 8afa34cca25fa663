// node inclusive.mjs FILE [LAST_S] : inclusive time % per function (name@line), top 60
import { readFileSync } from "node:fs";
const p = JSON.parse(readFileSync(process.argv[2], "utf8"));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map();
const from = process.env.LAST_S ? p.endTime - Number(process.env.LAST_S) * 1e6 : -Infinity;
let at = p.startTime;
p.samples.forEach((id, i) => { at += p.timeDeltas[i] ?? 0; if (at >= from) self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)); });
let total = 0; for (const [id, us] of self) { const f = byId.get(id).callFrame.functionName; if (f !== "(idle)") total += us; }
const inc = new Map();
for (const [id, us] of self) {
  const seen = new Set();
  let cur = id;
  while (cur) { const c = byId.get(cur).callFrame; const k = `${c.functionName || "(anon)"}@${c.url.split("/").pop()}:${c.lineNumber}`; if (!seen.has(k)) { seen.add(k); inc.set(k, (inc.get(k) ?? 0) + us); } cur = parent.get(cur); }
}
const re = process.env.MATCH ? new RegExp(process.env.MATCH) : null;
for (const [k, us] of [...inc].filter(([k]) => !re || re.test(k)).sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.TOP ?? 60))) console.log(((100 * us) / total).toFixed(2).padStart(6) + "%", k);
