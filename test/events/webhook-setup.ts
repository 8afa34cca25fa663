// The setup the webhook test files share: a service on the sample fixture with rate limits off,
// clients signed in as sample users, and the event runtime's relay and webhook dispatcher.
// EVENTS_POLL_MS is a minute so that a delivery follows the commit's wake-up, never the
// safety-net poll: a test that passes did not pass by waiting for the poll. webhookSuite runs it
// for a describe, with what its tests repeat: receivers and registrations undone after each test,
// cities created to raise events.
import { readFileSync } from "node:fs";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { type EventRuntime, type EventRuntimeOptions, startEventRuntime } from "../../src/events/runtime.ts";
import type { SampleUser } from "../helpers/auth.ts";
import type { Queryable } from "../../src/types.ts";
import { type Backend, createTestApp, SAMPLE_FIXTURE, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { eventually, type Respond, webhookReceiver } from "./support.ts";

const ANAG_ADMIN = { COD_MENU: "anag", OPERATIONS: ["read", "write"], LEVEL: 4 };
const masterDataAdmin = (id: string, peso: string) => ({
  user_id: id,
  password: `${id}-secret-1`,
  tenant_id: "acme",
  peso,
  centro_dett: "HQ",
  ambiente: "production",
  grants: [ANAG_ADMIN],
});

/** The sample, plus two level-4 users of the master data only (anag: CUST, ADDR, CITY): peso 2 and 3. */
export function sampleWithMasterDataAdmins(): Record<string, unknown> {
  const f = JSON.parse(readFileSync(SAMPLE_FIXTURE, "utf8")) as { users: unknown[] };
  f.users = [...f.users, masterDataAdmin("anag2", "2"), masterDataAdmin("anag3", "3")];
  return f;
}

export interface WebhookAppOptions<U extends SampleUser> {
  /** Sample users to sign in, in the order of `clients`. */
  users: readonly U[];
  /** WEBHOOK_ALLOW_PRIVATE=true: receivers on loopback may be registered and reached. */
  allowPrivate: boolean;
  /** Further configuration (retry base, concurrency limits). */
  env?: Record<string, string>;
  /** Parts of the event runtime; relay and webhooks by default. */
  parts?: EventRuntimeOptions;
  /** The fixture loaded (the sample's by default). */
  fixture?: Record<string, unknown>;
}

export interface WebhookApp<U extends SampleUser> {
  t: TestApp;
  clients: Record<U, Client>;
  runtime: EventRuntime;
  /** Stops the event runtime and starts a new one with the same parts (a restarted process). */
  restartRuntime(): Promise<void>;
  close(): Promise<void>;
}

export async function startWebhookApp<U extends SampleUser>(
  backend: Backend,
  opts: WebhookAppOptions<U>,
): Promise<WebhookApp<U>> {
  const parts = opts.parts ?? { relay: true, webhooks: true };
  const t = await createTestApp(backend, {
    fixture: opts.fixture ?? "sample",
    env: {
      ...NO_RATE_LIMITS,
      ...(opts.allowPrivate ? { WEBHOOK_ALLOW_PRIVATE: "true" } : {}),
      EVENTS_POLL_MS: "60000",
      ...opts.env,
    },
  });
  try {
    const signedIn = await Promise.all(opts.users.map((u) => clientFor(t.app, u)));
    const app: WebhookApp<U> = {
      t,
      clients: Object.fromEntries(opts.users.map((u, i) => [u, signedIn[i]!])) as Record<U, Client>,
      runtime: await startEventRuntime(t.services, parts),
      async restartRuntime() {
        await app.runtime.stop();
        app.runtime = await startEventRuntime(t.services, parts);
      },
      async close() {
        await app.runtime.stop();
        await t.close();
      },
    };
    return app;
  } catch (err) {
    // Nothing is returned for afterAll to close: the database goes now.
    await t.close();
    throw err;
  }
}

/**
 * A registration's delivery log as `client` reads it, once it has at least `rows` rows (of
 * `status`, when given).
 */
export function deliveryLogWith(
  client: Client,
  webhookId: string | number,
  rows: number,
  status?: string,
  // biome-ignore lint/suspicious/noExplicitAny: log rows are inspected freely
): Promise<any[]> {
  return eventually(
    async () => {
      const data = (await client.get(`/api/v4/webhooks/${webhookId}/deliveries`)).body.data;
      const counted = status ? data.filter((r: { STATUS: string }) => r.STATUS === status) : data;
      return counted.length >= rows ? data : undefined;
    },
    { what: `${rows} delivery log row(s)${status ? ` ${status}` : ""} of webhook ${webhookId}` },
  );
}

export type Receiver = Awaited<ReturnType<typeof webhookReceiver>>;

/** The event ids a receiver got, in the order they came. */
export const eventIdsOf = (r: Receiver): string[] => r.requests.map((q) => q.body.event_id as string);

/** Waits until `r` got the events `ids`; answers what it got. */
export const receivedEvents = (r: Receiver, ids: string[]) =>
  eventually(() => ids.every((id) => eventIdsOf(r).includes(id)) && r.requests, {
    what: `events ${ids.join(", ")}`,
  });

/** A registration's deliveries (TB_WEBHOOK_DELIVERY), by event id. */
export async function deliveryRows(db: Queryable, webhookId: string) {
  const { rows } = await db.query<{ OUTBOX_ID: string; STATUS: string; ATTEMPTS: number; BODY: string }>(
    `SELECT "OUTBOX_ID"::text AS "OUTBOX_ID", "STATUS", "ATTEMPTS", "BODY" FROM "TB_WEBHOOK_DELIVERY"
      WHERE "WEBHOOK_ID" = $1 ORDER BY "OUTBOX_ID"`,
    [Number(webhookId)],
  );
  return rows;
}

/** A describe's webhook app (started before its tests, closed after them) and its tests' helpers. */
export interface WebhookSuite<U extends SampleUser> {
  /** The started app (within the describe's tests and hooks). */
  readonly app: WebhookApp<U>;
  /** The signed-in users, usable as soon as the suite is declared (they reach the app once started). */
  readonly clients: Record<U, Client>;
  /** A receiver, closed after the test (after the test's registrations are deleted). */
  receiver(respond?: Respond): Promise<Receiver>;
  /** Registers a webhook as `as` (201 expected), deleted after the test: its id. */
  register(as: Client, body: Record<string, unknown>): Promise<string>;
  /** Creates a city as `as` (201 expected), a new CITY_ID each time: its id and its event's id. */
  createCity(as: Client, country?: string): Promise<{ id: string; eventId: string }>;
  /** How many cities createCity has created. */
  readonly citiesCreated: number;
}

/** Declares, in the calling describe, a webhook app started before its tests (startWebhookApp). */
export function webhookSuite<U extends SampleUser>(
  backend: Backend,
  opts: WebhookAppOptions<U>,
): WebhookSuite<U> {
  let app: WebhookApp<U> | null = null;
  let cities = 0;
  const registered: Array<[Client, string]> = [];
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    app = await startWebhookApp(backend, opts);
  });
  afterEach(async () => {
    // Registrations first, so that a closed receiver's failures do not start further attempts.
    // (A test may have deleted its own already: a 404 then.)
    for (const [c, id] of registered.splice(0)) await c.delete(`/api/v4/webhooks/${id}`);
    for (const r of receivers.splice(0)) await r.close();
  });
  afterAll(() => app?.close());
  const started = (): WebhookApp<U> => {
    if (!app) throw new Error("The webhook app is started in beforeAll.");
    return app;
  };
  const clientOf = (user: U): Client => ({
    get: (url) => started().clients[user].get(url),
    delete: (url) => started().clients[user].delete(url),
    post: (url, payload) => started().clients[user].post(url, payload),
    put: (url, payload) => started().clients[user].put(url, payload),
    patch: (url, payload) => started().clients[user].patch(url, payload),
  });
  const clients = Object.fromEntries(opts.users.map((u) => [u, clientOf(u)])) as Record<U, Client>;
  return {
    get app() {
      return started();
    },
    clients,
    async receiver(respond) {
      const receiver = await webhookReceiver(respond);
      receivers.push(receiver);
      return receiver;
    },
    async register(as, body) {
      const res = await as.post("/api/v4/webhooks", body);
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      const id = res.body.webhook_id as string;
      registered.push([as, id]);
      return id;
    },
    async createCity(as, country = "IT") {
      const id = `W${++cities}`;
      const res = await as.post("/api/v4/core/CITY?source=anag-3", {
        data: { CITY_ID: id, NAME: `Hook ${id}`, COUNTRY: country },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return { id, eventId: res.body.event_id as string };
    },
    get citiesCreated() {
      return cities;
    },
  };
}
