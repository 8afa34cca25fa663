// Databases per tenant in tests: a profile is a database of its own, created on the test
// PostgreSQL server (TEST_DATABASE_URL) and dropped afterwards; the sample fixture with globex
// placed on profile EU.
import { randomBytes } from "node:crypto";
import pg from "pg";
import { readFixtureFile } from "../../src/fixtures/import.ts";
import { SAMPLE_FIXTURE, TEST_DATABASE_URL } from "../helpers/env.ts";

export interface ProfileDatabase {
  name: string;
  url: string;
  /** A connection to it (closed by `drop`). */
  client: pg.Client;
  /** A statement on it, directly (not through the service). */
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  drop(): Promise<void>;
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: TEST_DATABASE_URL! });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

/** A new empty database on the test server, for a profile. */
export async function createProfileDatabase(): Promise<ProfileDatabase> {
  if (!TEST_DATABASE_URL) throw new Error("TEST_DATABASE_URL is not set");
  const name = `dimensio_p_${process.pid}_${randomBytes(4).toString("hex")}`;
  await admin((c) => c.query(`CREATE DATABASE "${name}"`));
  const u = new URL(TEST_DATABASE_URL);
  u.pathname = `/${name}`;
  const url = u.toString();
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  client.on("error", () => {});
  return {
    name,
    url,
    client,
    async query<R>(text: string, params: unknown[] = []) {
      return (await client.query(text, params)).rows as R[];
    },
    async drop() {
      await client.end().catch(() => {});
      await admin((c) => c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`));
    },
  };
}

/** The sample fixture with tenant globex (greta's) on database profile `profile`. */
export async function sampleWithGlobexOn(profile: string): Promise<Record<string, unknown>> {
  const fixture = (await readFixtureFile(SAMPLE_FIXTURE)) as { tenants: Array<Record<string, unknown>> };
  fixture.tenants = fixture.tenants.map((t) => (t.TENANT_ID === "globex" ? { ...t, DATABASE: profile } : t));
  return fixture as Record<string, unknown>;
}
