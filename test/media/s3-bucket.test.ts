// A misspelt or never created S3_BUCKET stops the start with the variable named (a configuration
// error), instead of every upload being answered 503 "retry later"; an existing bucket starts as before.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ConfigError, loadConfig } from "../../src/config.ts";
import { createLogger } from "../../src/logger.ts";
import { openMediaStore } from "../../src/services.ts";
import { TEST_JWT_SECRET } from "../helpers/env.ts";
import { type S3Server, startS3rver } from "./media-setup.ts";

describe("the S3 bucket at start (s3rver)", () => {
  let s3: S3Server;
  beforeAll(async () => {
    s3 = await startS3rver();
  });
  afterAll(() => s3?.close());

  const open = (bucket: string) =>
    openMediaStore(
      loadConfig({ JWT_SECRET: TEST_JWT_SECRET, ...s3.env, S3_BUCKET: bucket }),
      createLogger("silent"),
    );

  it("a bucket that does not exist is a configuration error naming S3_BUCKET", async () => {
    const err = await open("nosuchbucket").then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as ConfigError).problems).toEqual([
      `S3_BUCKET: the bucket nosuchbucket does not exist at S3_ENDPOINT ${s3.env.S3_ENDPOINT}: create it, or correct S3_BUCKET`,
    ]);
  });

  it("the bucket that exists opens the store", async () => {
    const store = await open("media");
    expect(store.kind).toBe("s3");
  });
});
