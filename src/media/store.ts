// Object storage for media (decisions.md §13): one interface, a local-directory backend (the
// embedded default, DATA_DIR/media) and an S3 backend (S3-compatible servers, path-style). Keys are
// built by src/media/keys.ts from validated parts only.
import type { DependencyState } from "../types.ts";
import type { Readable } from "node:stream";

export interface StoredObject {
  stream: Readable;
  /** Bytes of the whole object. */
  size: number;
  /** Bytes of the part streamed (a range), else equal to size. */
  length: number;
}

export interface ByteRange {
  start: number;
  /** Inclusive. */
  end: number;
}

export interface MediaStore {
  readonly kind: "local" | "s3";
  /** Streams `body` to `key`; resolves when it is stored (to the bytes written). */
  put(key: string, body: Readable, contentType: string): Promise<number>;
  /** The object or a byte range of it; null when absent. */
  get(key: string, range?: ByteRange): Promise<StoredObject | null>;
  /** Size, or null when absent. */
  size(key: string): Promise<number | null>;
  /** Moves an object (a staged upload to its place). */
  move(from: string, to: string): Promise<void>;
  /** Keys under a prefix, with their last change. */
  list(prefix: string): Promise<{ key: string; modified: Date }[]>;
  delete(keys: readonly string[]): Promise<void>;
  /** Reachability for /healthz and dimensio_dependency_up (a local directory has none: embedded). */
  dependencyState?(): DependencyState;
}
