// The setup the webhook test files share: a service on the sample fixture with rate limits off,
// clients signed in as sample users, and the event runtime's relay and webhook dispatcher.
// EVENTS_POLL_MS is a minute so that a delivery follows the commit's wake-up, never the
// safety-net poll: a test that passes did not pass by waiting for the poll.
import { type EventRuntime, type EventRuntimeOptions, startEventRuntime } from "../../src/events/runtime.ts";
import type { SampleUser } from "../helpers/auth.ts";
import { type Backend, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";
import { eventually } from "./support.ts";

export interface WebhookAppOptions<U extends SampleUser> {
  /** Sample users to sign in, in the order of `clients`. */
  users: readonly U[];
  /** WEBHOOK_ALLOW_PRIVATE=true: receivers on loopback may be registered and reached. */
  allowPrivate: boolean;
  /** Further configuration (retry base, concurrency limits). */
  env?: Record<string, string>;
  /** Parts of the event runtime; relay and webhooks by default. */
  parts?: EventRuntimeOptions;
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
    fixture: "sample",
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

/** A registration's delivery log as `client` reads it, once it has at least `rows` rows. */
export function deliveryLogWith(
  client: Client,
  webhookId: string | number,
  rows: number,
  // biome-ignore lint/suspicious/noExplicitAny: log rows are inspected freely
): Promise<any[]> {
  return eventually(
    async () => {
      const data = (await client.get(`/api/v4/webhooks/${webhookId}/deliveries`)).body.data;
      return data.length >= rows ? data : undefined;
    },
    { what: `${rows} delivery log row(s) of webhook ${webhookId}` },
  );
}
