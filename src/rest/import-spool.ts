// Import bodies spooled to disk (decisions §20, issue 39 §2). An import's body is received whole
// into a temporary file before any of its rows is written, so that receiving it is bounded by
// REQUEST_TIMEOUT_MS (Node's server counts that time until the request has fully arrived) and
// writing its rows by IMPORT_WRITE_TIMEOUT_MS, instead of the body being read only as fast as
// rows are written. The bytes are counted as they come (413 PAYLOAD_TOO_LARGE past
// IMPORT_MAX_BYTES, the file then removed). Files live in a directory of this process's own, made
// in IMPORT_SPOOL_DIR at the first import (mode 0700, files 0600); each is removed when its
// request ends, whatever the outcome, and the directory with whatever is left in it when the
// server closes.
//
// All the bodies a process holds at once are bounded too (IMPORT_SPOOL_MAX_BYTES): past it an
// import is refused with 503 IMPORT_SPOOL_FULL and Retry-After, and its file removed. A process
// killed before it could remove its directory leaves it behind: the directory names its owner
// (host and pid), and the next process to open a spool in the same root removes the directories
// of its host whose process is gone.
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, unlink, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { finished, type Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { ApiError, PayloadTooLargeError } from "../errors.ts";
import { processAlive } from "../process-alive.ts";

export function tooLarge(max: number): PayloadTooLargeError {
  return new PayloadTooLargeError(
    `An import body holds at most ${max} bytes (IMPORT_MAX_BYTES); split the rows into several imports.`,
    { max_bytes: max },
  );
}

/** 503 for an import that would take the process's spool past IMPORT_SPOOL_MAX_BYTES. */
export function spoolFull(maxBytes: number): ApiError {
  return new ApiError(
    503,
    "IMPORT_SPOOL_FULL",
    "ServiceUnavailable",
    `The imports under way hold ${maxBytes} bytes of bodies (IMPORT_SPOOL_MAX_BYTES), the most this server keeps at once; retry once they are done.`,
    { details: { spool_max_bytes: maxBytes }, headers: { "Retry-After": String(SPOOL_FULL_RETRY_S) } },
  );
}

/** Seconds a client is asked to wait when the spool is full: an import takes seconds to minutes. */
const SPOOL_FULL_RETRY_S = 30;

/** The bytes every body of a spool holds together, taken as they arrive and given back with the file. */
interface SpoolBudget {
  readonly max: number;
  used: number;
}

/** Counts the bytes that pass: 413 once more than `max` came, 503 once the spool's budget is spent. */
class ByteLimit extends Transform {
  bytes = 0;
  /** What this body took of the budget so far. */
  private taken = 0;
  constructor(
    private readonly max: number,
    private readonly budget: SpoolBudget,
  ) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    if (this.bytes + chunk.length > this.max) {
      done(tooLarge(this.max));
      return;
    }
    if (this.budget.used + chunk.length > this.budget.max) {
      done(spoolFull(this.budget.max));
      return;
    }
    this.bytes += chunk.length;
    this.taken += chunk.length;
    this.budget.used += chunk.length;
    done(null, chunk);
  }
  /** Gives the budget back what this body took (its file is gone); calling it again does nothing. */
  release(): void {
    this.budget.used -= this.taken;
    this.taken = 0;
  }
}

/** A body received whole into its file. */
export interface SpooledBody {
  readonly bytes: number;
  /** The body's bytes, read from the file (each call a new stream, closed by `remove`). */
  open(): Readable;
  /** Closes the streams `open` gave and removes the file; never rejects; calling it again does nothing. */
  remove(): Promise<void>;
}

export interface ImportSpool {
  /**
   * Receives `body` into a new file of the spool: 413 past `maxBytes`; a body cut off (the client
   * gone, the request timeout) rejects with the stream's error; `signal` aborted (the server
   * closing) rejects with its reason. On any failure the file is removed before it rejects.
   * `body` is the request's stream and is only read from, never destroyed: its socket still
   * carries the answer.
   */
  receive(body: Readable, maxBytes: number, signal: AbortSignal): Promise<SpooledBody>;
  /** Removes the spool's directory and every file left in it (the server closing). */
  close(): Promise<void>;
}

export interface ImportSpoolOptions {
  /** The bytes all bodies held at once may take (IMPORT_SPOOL_MAX_BYTES). */
  maxBytes: number;
}

const SPOOL_PREFIX = "dimensio-import-";
/** The file in a spool directory naming the process that made it. */
const OWNER_FILE = "owner.json";

/**
 * A spool whose directory is made in `root` (made too when missing) at its first use, after the
 * directories of this host's dead processes are removed from `root`.
 */
export function createImportSpool(root: string, opts: ImportSpoolOptions): ImportSpool {
  const budget: SpoolBudget = { max: opts.maxBytes, used: 0 };
  let directory: Promise<string> | null = null;
  const dir = () => {
    if (!directory) {
      const making = mkdir(root, { recursive: true, mode: 0o700 })
        .then(() => removeOrphans(root))
        .then(() => mkdtemp(path.join(root, SPOOL_PREFIX)))
        .then(async (made) => {
          await writeFile(path.join(made, OWNER_FILE), ownerStamp(), { mode: 0o600 });
          return made;
        });
      // A failed attempt (a directory that cannot be made) is tried again by the next import.
      making.catch(() => {
        if (directory === making) directory = null;
      });
      directory = making;
    }
    return directory;
  };

  async function receive(body: Readable, maxBytes: number, signal: AbortSignal): Promise<SpooledBody> {
    if (signal.aborted) throw signal.reason;
    const file = path.join(await dir(), `${randomUUID()}.body`);
    const limit = new ByteLimit(maxBytes, budget);
    const out = createWriteStream(file, { flags: "wx", mode: 0o600 });
    // The request stream's own end: an error or a close before its end (the client gone, Node's
    // request timeout) stops the file's pipeline. pipe() alone would wait for more bytes forever.
    const stopWatching = finished(body, (err) => {
      if (err) limit.destroy(err);
    });
    body.pipe(limit);
    try {
      await pipeline(limit, out, { signal });
    } catch (err) {
      body.unpipe(limit);
      await unlink(file).catch(() => {});
      limit.release();
      throw signal.aborted ? signal.reason : err;
    } finally {
      stopWatching();
    }
    return spooledBody(file, limit.bytes, () => limit.release());
  }

  return {
    receive,
    async close() {
      const made = directory;
      directory = null;
      const at = await made?.catch(() => null);
      if (at) await rm(at, { recursive: true, force: true });
    },
  };
}

function spooledBody(file: string, bytes: number, release: () => void): SpooledBody {
  const streams: Readable[] = [];
  let removed: Promise<void> | null = null;
  return {
    bytes,
    open() {
      const stream = createReadStream(file, { highWaterMark: 64 * 1024 });
      streams.push(stream);
      return stream;
    },
    remove() {
      removed ??= (async () => {
        for (const s of streams) s.destroy();
        // Gone already when the server's close removed the directory first; a file that cannot be
        // removed now goes with the directory then.
        await unlink(file).catch(() => {});
        release();
      })();
      return removed;
    },
  };
}

function ownerStamp(): string {
  return JSON.stringify({ host: os.hostname(), pid: process.pid });
}

/**
 * Removes the spool directories in `root` that a process of this host made and that outlived it
 * (killed before its close). Directories of other hosts (a shared volume), of live processes, and
 * without an owner file are left alone; a directory that cannot be read or removed is left too.
 */
async function removeOrphans(root: string): Promise<void> {
  const entries = await readdir(root, { withFileTypes: true }).catch(() => []);
  const host = os.hostname();
  for (const entry of entries) {
    if (!entry.isDirectory() || !entry.name.startsWith(SPOOL_PREFIX)) continue;
    const at = path.join(root, entry.name);
    const owner = await readFile(path.join(at, OWNER_FILE), "utf8")
      .then((text) => JSON.parse(text) as { host?: unknown; pid?: unknown })
      .catch(() => null);
    if (!owner || owner.host !== host || typeof owner.pid !== "number") continue;
    if (owner.pid === process.pid || processAlive(owner.pid)) continue;
    await rm(at, { recursive: true, force: true }).catch(() => {});
  }
}
