// The spool's bounds beyond one body (issue 39 §2): the bodies a process holds at once are capped
// (IMPORT_SPOOL_MAX_BYTES: 503 IMPORT_SPOOL_FULL with Retry-After, the file removed, the budget
// given back), and the directories of this host's processes that died without closing their
// spool are removed by the next spool opened in the same root. Real files, real processes.
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Readable } from "node:stream";
import { afterEach, describe, expect, it } from "vitest";
import { ApiError } from "../../src/errors.ts";
import { createImportSpool } from "../../src/rest/import-spool.ts";

const roots: string[] = [];
async function freshRoot(): Promise<string> {
  const root = await mkdtemp(path.join(os.tmpdir(), "dimensio-spool-bounds-"));
  roots.push(root);
  return root;
}
afterEach(async () => {
  for (const root of roots.splice(0)) await rm(root, { recursive: true, force: true });
});

const body = (bytes: number) => Readable.from([Buffer.alloc(bytes, 0x61)]);
const never = () => new AbortController().signal;

/** The body files under `root` (owner.json aside). */
async function bodyFiles(root: string): Promise<string[]> {
  const entries = await readdir(root, { recursive: true, withFileTypes: true });
  return entries.filter((e) => e.isFile() && e.name.endsWith(".body")).map((e) => e.name);
}

/** The pid of a process that ran and is gone. */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ["-e", ""], { stdio: "ignore" });
  await once(child, "exit");
  return child.pid!;
}

describe("the spool's budget across imports (IMPORT_SPOOL_MAX_BYTES)", () => {
  it("a body that would take the bodies held past the budget is refused with 503 and Retry-After; removing a held body makes room again", async () => {
    const root = await freshRoot();
    const spool = createImportSpool(root, { maxBytes: 10_000 });
    const held = await spool.receive(body(6_000), 1_000_000, never());
    expect(held.bytes).toBe(6_000);

    const refused = await spool.receive(body(6_000), 1_000_000, never()).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ApiError);
    const err = refused as ApiError;
    expect([err.status, err.code, err.headers]).toEqual([503, "IMPORT_SPOOL_FULL", { "Retry-After": "30" }]);
    expect(err.toBody()).toMatchObject({
      error: "ServiceUnavailable",
      status: 503,
      details: { spool_max_bytes: 10_000 },
    });
    expect(err.message).toContain("IMPORT_SPOOL_MAX_BYTES");
    // The refused body's file is gone; the held one stays.
    expect(await bodyFiles(root)).toHaveLength(1);

    // A body that fits beside the held one is taken.
    const small = await spool.receive(body(4_000), 1_000_000, never());
    expect(await bodyFiles(root)).toHaveLength(2);
    await small.remove();
    await held.remove();
    // Both gave their bytes back: the whole budget is free again (removing twice gives nothing twice).
    await held.remove();
    const whole = await spool.receive(body(10_000), 1_000_000, never());
    expect(whole.bytes).toBe(10_000);
    await whole.remove();
    await expect(spool.receive(body(10_001), 1_000_000, never())).rejects.toMatchObject({
      code: "IMPORT_SPOOL_FULL",
    });
    expect(await bodyFiles(root)).toEqual([]);
    await spool.close();
  });

  it("a body refused for its own size (413) gives back what it took of the budget", async () => {
    const root = await freshRoot();
    const spool = createImportSpool(root, { maxBytes: 10_000 });
    const chunks = Readable.from([Buffer.alloc(4_000), Buffer.alloc(4_000)]);
    await expect(spool.receive(chunks, 5_000, never())).rejects.toMatchObject({
      status: 413,
      code: "PAYLOAD_TOO_LARGE",
    });
    const whole = await spool.receive(body(10_000), 1_000_000, never());
    expect(whole.bytes).toBe(10_000);
    await whole.remove();
    await spool.close();
  });
});

describe("spool directories left by dead processes", () => {
  it("the first import of a new spool removes this host's directories whose process is gone, and no other", async () => {
    const root = await freshRoot();
    const host = os.hostname();
    const make = async (name: string, owner: unknown) => {
      const dir = path.join(root, name);
      await mkdir(dir);
      await writeFile(path.join(dir, "left.body"), "rows");
      if (owner !== undefined) await writeFile(path.join(dir, "owner.json"), JSON.stringify(owner));
    };
    await make("dimensio-import-dead", { host, pid: await deadPid() });
    await make("dimensio-import-live", { host, pid: process.pid });
    await make("dimensio-import-parent", { host, pid: process.ppid });
    await make("dimensio-import-elsewhere", { host: `${host}-other`, pid: await deadPid() });
    await make("dimensio-import-unowned", undefined);
    await make("not-a-spool", { host, pid: await deadPid() });

    const spool = createImportSpool(root, { maxBytes: 1_000_000 });
    // Nothing is swept before the spool is used.
    expect((await readdir(root)).sort()).toHaveLength(6);
    const taken = await spool.receive(body(10), 1_000, never());
    const left = (await readdir(root)).sort();
    expect(
      left.filter((n) => !n.startsWith("dimensio-import-") || /-(live|parent|elsewhere|unowned)$/.test(n)),
    ).toEqual([
      "dimensio-import-elsewhere",
      "dimensio-import-live",
      "dimensio-import-parent",
      "dimensio-import-unowned",
      "not-a-spool",
    ]);
    // The spool's own directory, named for this process.
    const own = left.filter(
      (n) => n.startsWith("dimensio-import-") && !/-(live|parent|elsewhere|unowned)$/.test(n),
    );
    expect(own).toHaveLength(1);
    const owner = await readFile(path.join(root, own[0]!, "owner.json"), "utf8");
    expect(JSON.parse(owner)).toEqual({ host, pid: process.pid });
    await taken.remove();
    await spool.close();
    expect((await readdir(root)).sort()).toEqual([
      "dimensio-import-elsewhere",
      "dimensio-import-live",
      "dimensio-import-parent",
      "dimensio-import-unowned",
      "not-a-spool",
    ]);
  });

  it("a service killed with SIGKILL mid-import leaves its directory; the next service's first import removes it", async () => {
    const root = await freshRoot();
    // A process that opens a spool, receives a body into it and then holds still until killed.
    const script = `
      import { createImportSpool } from ${JSON.stringify(path.resolve("src/rest/import-spool.ts"))};
      import { Readable } from "node:stream";
      const spool = createImportSpool(${JSON.stringify(root)}, { maxBytes: 1e6 });
      await spool.receive(Readable.from([Buffer.from("rows")]), 1e3, new AbortController().signal);
      process.stdout.write("held\\n");
      setInterval(() => {}, 1e6);
    `;
    const child = spawn(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    const [first] = (await once(child.stdout!, "data")) as [Buffer];
    expect(first.toString()).toBe("held\n");
    expect(await bodyFiles(root)).toHaveLength(1);
    child.kill("SIGKILL");
    await once(child, "exit");
    expect(await bodyFiles(root)).toHaveLength(1);

    const spool = createImportSpool(root, { maxBytes: 1_000_000 });
    const taken = await spool.receive(body(10), 1_000, never());
    expect(await bodyFiles(root)).toHaveLength(1); // only the new one
    await taken.remove();
    await spool.close();
    expect(await readdir(root)).toEqual([]);
  });
});
