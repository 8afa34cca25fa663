// node callers.mjs FILE NAME : the call stacks (3 frames up) leading to NAME, by self time
import { readFileSync } from "node:fs";
const p = JSON.parse(readFileSync(process.argv[2], "utf8"));
const byId = new Map(p.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of p.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map();
p.samples.forEach((id, i) => self.set(id, (self.get(id) ?? 0) + (p.timeDeltas[i] ?? 0)));
const total = [...self.values()].reduce((a, b) => a + b, 0);
const depth = Number(process.env.DEPTH ?? 6);
const stacks = new Map();
for (const [id, us] of self) {
  const n = byId.get(id);
  if (n.callFrame.functionName !== process.argv[3]) continue;
  let chain = [];
  let cur = parent.get(id);
  for (let i = 0; i < depth && cur; i++) {
    const c = byId.get(cur).callFrame;
    chain.push(`${c.functionName || "(anon)"}:${c.lineNumber}`);
    cur = parent.get(cur);
  }
  const k = chain.join(" < ");
  stacks.set(k, (stacks.get(k) ?? 0) + us);
}
for (const [k, us] of [...stacks].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log(((100 * us) / total).toFixed(2) + "%", k);
