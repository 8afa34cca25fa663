// Import bodies spooled to disk (decisions §20, issue 39 §2). An import's body is received whole
// into a temporary file before any of its rows is written, so that receiving it is bounded by
// REQUEST_TIMEOUT_MS (Node's server counts that time until the request has fully arrived) and
// writing its rows by IMPORT_WRITE_TIMEOUT_MS, instead of the body being read only as fast as
// rows are written. The bytes are counted as they come (413 PAYLOAD_TOO_LARGE past
// IMPORT_MAX_BYTES, the file then removed). Files live in a directory of this process's own, made
// in IMPORT_SPOOL_DIR at the first import (mode 0700, files 0600); each is removed when its
// request ends, whatever the outcome, and the directory with whatever is left in it when the
// server closes.
import { randomUUID } from "node:crypto";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, mkdtemp, rm, unlink } from "node:fs/promises";
import path from "node:path";
import { finished, type Readable, Transform, type TransformCallback } from "node:stream";
import { pipeline } from "node:stream/promises";
import { PayloadTooLargeError } from "../errors.ts";

export function tooLarge(max: number): PayloadTooLargeError {
  return new PayloadTooLargeError(`An import body holds at most ${max} bytes (IMPORT_MAX_BYTES).`, {
    max_bytes: max,
  });
}

/** Counts the bytes that pass: 413 once more than `max` came. */
class ByteLimit extends Transform {
  bytes = 0;
  constructor(private readonly max: number) {
    super();
  }
  override _transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    this.bytes += chunk.length;
    if (this.bytes > this.max) done(tooLarge(this.max));
    else done(null, chunk);
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

/** A spool whose directory is made in `root` (made too when missing) at its first use. */
export function createImportSpool(root: string): ImportSpool {
  let directory: Promise<string> | null = null;
  const dir = () => {
    if (!directory) {
      const making = mkdir(root, { recursive: true, mode: 0o700 }).then(() =>
        mkdtemp(path.join(root, "dimensio-import-")),
      );
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
    const limit = new ByteLimit(maxBytes);
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
      throw signal.aborted ? signal.reason : err;
    } finally {
      stopWatching();
    }
    return spooledBody(file, limit.bytes);
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

function spooledBody(file: string, bytes: number): SpooledBody {
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
      })();
      return removed;
    },
  };
}
