// What the robustness tests read of a running app.
import type { TestApp } from "../helpers/env.ts";

/** dimensio_heavy_requests{state} from /metrics: heavy requests running or waiting in their lanes. */
export async function heavyGauge(t: TestApp, state: "running" | "waiting"): Promise<number> {
  const text = (await t.app.inject({ method: "GET", url: "/metrics" })).body;
  const line = text
    .split("\n")
    .find((l) => l.startsWith("dimensio_heavy_requests{") && l.includes(`state="${state}"`));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : Number.NaN;
}
