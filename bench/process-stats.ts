// What the benches read of a server process from /proc: its CPU time, its memory, and whether it
// has gone quiet (the work a load left behind done before the next measurement).
import { readFileSync } from "node:fs";

/** Clock ticks per second of /proc's CPU times (USER_HZ: 100 on Linux). */
export const TICK_MS = 10;

/** CPU time (user + system) of a process so far, in ms. */
export function processCpuMs(pid: number): number {
  // Fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
  const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
}

/** A memory figure of /proc/<pid>/status (VmRSS: resident now, VmHWM: its peak), in MB. */
export function memoryMb(pid: number, field: "VmRSS" | "VmHWM"): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith(`${field}:`));
  return Number(line?.split(/\s+/)[1] ?? 0) / 1024;
}

/** Resolves once the process has used less than two clock ticks of CPU in `windowMs` (or gives up). */
export async function processQuiet(pid: number, windowMs = 300, timeoutMs = 30_000): Promise<void> {
  let last = processCpuMs(pid);
  for (const deadline = Date.now() + timeoutMs; Date.now() < deadline; ) {
    await new Promise((r) => setTimeout(r, windowMs));
    const now = processCpuMs(pid);
    if (now - last < 2 * TICK_MS) return;
    last = now;
  }
}
