// The local-directory media store: one file per key under the root directory. Keys come from
// keys.ts (no `..`, no absolute paths); the resolved path is checked to stay under the root anyway.
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, readdir, rename, rm, stat } from "node:fs/promises";
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
  return {
    kind: "local",
    async put(key, body: Readable) {
      const target = file(key);
      await mkdir(path.dirname(target), { recursive: true });
      const partial = `${target}.partial`;
      try {
        await pipeline(body, createWriteStream(partial));
        await rename(partial, target);
      } catch (err) {
        await rm(partial, { force: true });
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
      await mkdir(path.dirname(file(to)), { recursive: true });
      await rename(file(from), file(to));
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
          if (e.isDirectory()) await walk(p);
          else
            out.push({
              key: path.relative(base, p).split(path.sep).join("/"),
              modified: (await stat(p)).mtime,
            });
        }
      };
      await walk(dir);
      return out;
    },
    async delete(keys) {
      await Promise.all(keys.map((k) => rm(file(k), { force: true })));
    },
  };
}
