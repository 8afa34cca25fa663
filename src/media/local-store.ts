// The local-directory media store: one file per key under the root directory. Keys come from
// keys.ts (no `..`, no absolute paths); the resolved path is checked to stay under the root anyway.
// A directory left empty by a delete, a move or a failed write is removed, up to the root; a
// writer that finds its directory removed under it (a concurrent prune) makes it again.
import { createReadStream } from "node:fs";
import { mkdir, open, readdir, rename, rm, rmdir, stat } from "node:fs/promises";
import path from "node:path";
import type { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ByteRange, MediaStore } from "./store.ts";

export function createLocalStore(root: string): MediaStore {
  const base = path.resolve(root);
  const file = (key: string) => {
    const p = path.resolve(base, key);
    if (!p.startsWith(`${base}${path.sep}`)) throw new Error(`media key outside the store: ${key}`);
    return p;
  };
  const sizeOf = async (key: string) => {
    try {
      return (await stat(file(key))).size;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw err;
    }
  };
  /** Removes `dir` and its parents while they are empty, never the root. */
  const prune = async (dir: string) => {
    for (let d = dir; d.startsWith(`${base}${path.sep}`); d = path.dirname(d)) {
      try {
        await rmdir(d);
      } catch {
        return; // not empty (ENOTEMPTY/EEXIST), already gone, or not ours to remove
      }
    }
  };
  /** Runs `fn` once the directory of `target` exists, again if a prune removed it meanwhile. */
  const inDirectory = async <T>(target: string, fn: () => Promise<T>): Promise<T> => {
    for (let attempt = 0; ; attempt++) {
      await mkdir(path.dirname(target), { recursive: true });
      try {
        return await fn();
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== "ENOENT" || attempt >= 3) throw err;
      }
    }
  };
  return {
    kind: "local",
    async put(key, body: Readable) {
      const target = file(key);
      const partial = `${target}.partial`;
      const handle = await inDirectory(partial, () => open(partial, "w"));
      try {
        await pipeline(body, handle.createWriteStream());
        await inDirectory(target, () => rename(partial, target));
      } catch (err) {
        await handle.close().catch(() => {});
        await rm(partial, { force: true });
        await prune(path.dirname(partial));
        throw err;
      }
      return (await stat(target)).size;
    },
    async get(key, range?: ByteRange) {
      const size = await sizeOf(key);
      if (size === null) return null;
      const stream = range ? createReadStream(file(key), range) : createReadStream(file(key));
      return { stream, size, length: range ? range.end - range.start + 1 : size };
    },
    size: sizeOf,
    async move(from, to) {
      await inDirectory(file(to), () => rename(file(from), file(to)));
      await prune(path.dirname(file(from)));
    },
    async list(prefix) {
      const dir = file(prefix.replace(/\/$/, ""));
      const out: { key: string; modified: Date }[] = [];
      const walk = async (d: string) => {
        let entries: import("node:fs").Dirent[];
        try {
          entries = await readdir(d, { withFileTypes: true });
        } catch (err) {
          if ((err as NodeJS.ErrnoException).code === "ENOENT") return;
          throw err;
        }
        for (const e of entries) {
          const p = path.join(d, e.name);
          if (e.isDirectory()) {
            await walk(p);
            continue;
          }
          // A file deleted while the listing runs (a concurrent clean-up) is not listed.
          const info = await stat(p).catch((err: NodeJS.ErrnoException) => {
            if (err.code === "ENOENT") return null;
            throw err;
          });
          if (info) out.push({ key: path.relative(base, p).split(path.sep).join("/"), modified: info.mtime });
        }
      };
      await walk(dir);
      return out;
    },
    async delete(keys) {
      await Promise.all(keys.map((k) => rm(file(k), { force: true })));
      const dirs = new Set(keys.map((k) => path.dirname(file(k))));
      for (const d of dirs) await prune(d);
    },
  };
}
