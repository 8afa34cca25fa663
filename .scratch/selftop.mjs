import { readFileSync } from "node:fs";
const p = JSON.parse(readFileSync(process.argv[2], "utf8"));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const self = new Map();
const from = process.env.LAST_S ? p.endTime - Number(process.env.LAST_S) * 1e6 : -Infinity;
let at = p.startTime, total = 0;
p.samples.forEach((id, i) => { at += p.timeDeltas[i] ?? 0; if (at < from) return; const c = byId.get(id).callFrame; if (c.functionName === "(idle)") return; total += p.timeDeltas[i] ?? 0; const k = `${c.functionName || "(anon)"}@${c.url.split("/").slice(-2).join("/")}:${c.lineNumber}`; self.set(k, (self.get(k) ?? 0) + (p.timeDeltas[i] ?? 0)); });
const re = process.env.MATCH ? new RegExp(process.env.MATCH) : null;
for (const [k, us] of [...self].filter(([k]) => !re || re.test(k)).sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.TOP ?? 40))) console.log(((100 * us) / total).toFixed(2).padStart(6) + "%", k);
