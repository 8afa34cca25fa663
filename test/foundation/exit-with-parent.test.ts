// A service a test spawned ends when the test's process does (test/helpers/exit-with-parent.mjs):
// a test that times out or is killed half-way leaves nothing running.
import { spawn } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { processAlive } from "../../src/process-alive.ts";

const HELPER = path.resolve(import.meta.dirname, "../helpers/process.ts");
let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "dimensio-orphan-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

function gone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  return new Promise((resolve) => {
    const check = () => {
      if (!processAlive(pid)) return resolve(true);
      if (Date.now() > deadline) return resolve(false);
      setTimeout(check, 100);
    };
    check();
  });
}

test("a process spawned through test/helpers/process.ts ends when its parent is killed", async () => {
  // A long-running script, spawned by a parent that is then SIGKILLed (as a worker is, or exits
  // without its test's teardown): the script must not outlive it.
  const script = path.join(dir, "forever.mjs");
  await writeFile(script, "setInterval(() => {}, 1000);\n");
  const parentCode = `
    import { spawnScript } from ${JSON.stringify(HELPER)};
    const running = spawnScript(${JSON.stringify(script)}, [], {});
    process.stdout.write(String(running.child.pid) + "\\n");
    setInterval(() => {}, 1000);
  `;
  const parent = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", parentCode], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const childPid = await new Promise<number>((resolve, reject) => {
    let out = "";
    parent.stdout.on("data", (d) => {
      out += String(d);
      if (out.includes("\n")) resolve(Number(out.trim()));
    });
    parent.once("exit", (code) => reject(new Error(`the parent exited (${code}) before spawning`)));
  });
  expect(processAlive(childPid)).toBe(true);
  const parentExited = new Promise((resolve) => parent.once("exit", resolve));
  parent.kill("SIGKILL");
  await parentExited;
  const ended = await gone(childPid, 15_000);
  if (!ended) process.kill(childPid, "SIGKILL");
  expect(ended).toBe(true);
});
