// Sums a V8 .cpuprofile's self time by package / project module, and lists the top functions.
//   node bench/summarise-profile.mjs FILE.cpuprofile
// LAST_S=8 counts only the profile's last 8 seconds (the load, without the seeding before it).
import { readFileSync } from "node:fs";

const profile = JSON.parse(readFileSync(process.argv[2], "utf8"));
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const self = new Map();
const dt = profile.timeDeltas;
const from = process.env.LAST_S ? profile.endTime - Number(process.env.LAST_S) * 1e6 : -Infinity;
let at = profile.startTime;
profile.samples.forEach((id, i) => {
  at += dt[i] ?? 0;
  if (at >= from) self.set(id, (self.get(id) ?? 0) + (dt[i] ?? 0));
});
const total = [...self.values()].reduce((a, b) => a + b, 0);
const groups = new Map();
const functions = new Map();
for (const [id, us] of self) {
  const n = byId.get(id);
  const url = n.callFrame.url || "";
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  const group = m
    ? m[1]
    : url.includes("/src/")
      ? `src/${url.split("/src/")[1].split("/")[0]}`
      : url
        ? "node:internal"
        : n.callFrame.functionName || "(other)";
  groups.set(group, (groups.get(group) ?? 0) + us);
  const fn = `${n.callFrame.functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}`;
  functions.set(fn, (functions.get(fn) ?? 0) + us);
}
const pct = (us) => ((us / total) * 100).toFixed(1);
console.log("| where | self time % |\n|---|---:|");
for (const [g, us] of [...groups].sort((a, b) => b[1] - a[1]).slice(0, 18))
  console.log(`| ${g} | ${pct(us)} |`);
console.log("\ntop functions:");
for (const [f, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, Number(process.env.TOP ?? 15)))
  console.log(`${pct(us)}%  ${f}`);
