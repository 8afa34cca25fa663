// The S3 media store (@aws-sdk/client-s3; path-style for S3-compatible servers). Uploads stream
// through lib-storage's multipart Upload, so an object of unknown length never sits in memory
// whole (parts of 5 MB, at most 2 in flight). The SDK is loaded when a store is made: a service
// without S3 does not carry it.
import { ConfigError } from "../config.ts";
import { observeS3 } from "../observability/dependencies.ts";
import type { Readable } from "node:stream";
import type { S3Client } from "@aws-sdk/client-s3";
import type { MediaStore } from "./store.ts";

export interface S3StoreOptions {
  endpoint: string | null;
  bucket: string;
  region: string;
  accessKeyId: string | null;
  secretAccessKey: string | null;
  forcePathStyle: boolean;
}

const notFound = (err: unknown) => {
  const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
  return e.name === "NotFound" || e.name === "NoSuchKey" || e.$metadata?.httpStatusCode === 404;
};

/** How long the start waits on the bucket check: an S3 that does not answer does not hold it longer. */
const BUCKET_CHECK_MS = 2000;

/**
 * At start: a bucket the server says does not exist (a misspelt or never created S3_BUCKET) is a
 * configuration error, not an outage every upload would be answered 503 "retry later" for. Any
 * other failure (the server away, a policy refusing HeadBucket) leaves it to the requests.
 */
async function checkBucket(
  head: (signal: AbortSignal) => Promise<unknown>,
  opts: S3StoreOptions,
): Promise<void> {
  try {
    await head(AbortSignal.timeout(BUCKET_CHECK_MS));
  } catch (err) {
    const e = err as { name?: string; $metadata?: { httpStatusCode?: number } };
    if (e.name === "NoSuchBucket" || (e.name === "NotFound" && e.$metadata?.httpStatusCode === 404))
      throw new ConfigError([
        `S3_BUCKET: the bucket ${opts.bucket} does not exist${opts.endpoint ? ` at S3_ENDPOINT ${opts.endpoint}` : ""}: create it, or correct S3_BUCKET`,
      ]);
  }
}

export async function createS3Store(opts: S3StoreOptions): Promise<MediaStore & { client: S3Client }> {
  const {
    CopyObjectCommand,
    DeleteObjectsCommand,
    GetObjectCommand,
    HeadBucketCommand,
    HeadObjectCommand,
    ListObjectsV2Command,
    S3Client,
  } = await import("@aws-sdk/client-s3");
  const { Upload } = await import("@aws-sdk/lib-storage");
  const client = new S3Client({
    region: opts.region,
    // A server that does not answer fails the request instead of holding it (guarded.ts then
    // answers 503 MEDIA_STORE_UNAVAILABLE): a connection within 3 s, no socket idle for 30 s, one
    // retry.
    requestHandler: { connectionTimeout: 3000, socketTimeout: 30_000 },
    maxAttempts: 2,
    forcePathStyle: opts.forcePathStyle || opts.endpoint !== null,
    ...(opts.endpoint ? { endpoint: opts.endpoint } : {}),
    ...(opts.accessKeyId && opts.secretAccessKey
      ? { credentials: { accessKeyId: opts.accessKeyId, secretAccessKey: opts.secretAccessKey } }
      : {}),
  });
  const state = observeS3(client);
  const Bucket = opts.bucket;
  await checkBucket((abortSignal) => client.send(new HeadBucketCommand({ Bucket }), { abortSignal }), opts);
  const size = async (key: string) => {
    try {
      const head = await client.send(new HeadObjectCommand({ Bucket, Key: key }));
      return head.ContentLength ?? 0;
    } catch (err) {
      if (notFound(err)) return null;
      throw err;
    }
  };
  return {
    kind: "s3",
    client,
    dependencyState: state,
    async put(key, body: Readable, contentType) {
      const upload = new Upload({
        client,
        params: { Bucket, Key: key, Body: body, ContentType: contentType },
        queueSize: 2,
        partSize: 5 * 1024 * 1024,
        leavePartsOnError: false,
      });
      await upload.done();
      return (await size(key)) ?? 0;
    },
    async get(key, range) {
      try {
        const res = await client.send(
          new GetObjectCommand({
            Bucket,
            Key: key,
            ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
          }),
        );
        const length = res.ContentLength ?? 0;
        const total = range ? Number(/\/(\d+)$/.exec(res.ContentRange ?? "")?.[1] ?? length) : length;
        return { stream: res.Body as Readable, size: total, length };
      } catch (err) {
        if (notFound(err)) return null;
        throw err;
      }
    },
    size,
    async move(from, to) {
      await client.send(
        new CopyObjectCommand({ Bucket, Key: to, CopySource: `${Bucket}/${encodeURI(from)}` }),
      );
      await client.send(new DeleteObjectsCommand({ Bucket, Delete: { Objects: [{ Key: from }] } }));
    },
    async list(prefix) {
      const out: { key: string; modified: Date }[] = [];
      let token: string | undefined;
      do {
        const page = await client.send(
          new ListObjectsV2Command({
            Bucket,
            Prefix: prefix,
            ...(token ? { ContinuationToken: token } : {}),
          }),
        );
        for (const o of page.Contents ?? [])
          if (o.Key) out.push({ key: o.Key, modified: o.LastModified ?? new Date(0) });
        token = page.IsTruncated ? page.NextContinuationToken : undefined;
      } while (token);
      return out;
    },
    async delete(keys) {
      for (let i = 0; i < keys.length; i += 1000) {
        const batch = keys.slice(i, i + 1000);
        if (batch.length) {
          await client.send(
            new DeleteObjectsCommand({ Bucket, Delete: { Objects: batch.map((Key) => ({ Key })) } }),
          );
        }
      }
    },
  };
}
