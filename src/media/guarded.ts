// A media store whose faults are typed (issue 18): an S3 server that refuses, resets or does not
// answer, a local directory that cannot be written (full disk, permissions) — any failure of the
// store itself becomes 503 MEDIA_STORE_UNAVAILABLE (MediaStoreUnavailableError) instead of a 500.
// Typed errors pass through, and so does the failure of an upload's own body (too large, the client
// gone): that is the request's fault, not the store's.
import type { Readable } from "node:stream";
import { ApiError, MediaStoreUnavailableError } from "../errors.ts";
import type { Logger } from "../logger.ts";
import type { MediaStore } from "./store.ts";

export function guardMediaStore(store: MediaStore, logger: Logger): MediaStore {
  const unavailable = (op: string, err: unknown) => {
    if (err instanceof ApiError) return err;
    logger.warn({ err, store: store.kind, op }, "media store unavailable");
    return new MediaStoreUnavailableError(err);
  };
  const guarded =
    <A extends unknown[], R>(op: string, fn: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await fn(...args);
      } catch (err) {
        throw unavailable(op, err);
      }
    };
  return {
    kind: store.kind,
    ...(store.dependencyState ? { dependencyState: store.dependencyState.bind(store) } : {}),
    async put(key: string, body: Readable, contentType: string) {
      let bodyFailed = false;
      body.once("error", () => {
        bodyFailed = true;
      });
      try {
        return await store.put(key, body, contentType);
      } catch (err) {
        if (bodyFailed || body.errored) throw err;
        throw unavailable("put", err);
      }
    },
    get: guarded("get", store.get.bind(store)),
    size: guarded("size", store.size.bind(store)),
    move: guarded("move", store.move.bind(store)),
    list: guarded("list", store.list.bind(store)),
    delete: guarded("delete", store.delete.bind(store)),
  };
}
