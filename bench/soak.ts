// bench/soak (issues 18 §5, 38): Dimensio as `npm start` runs it, on PostgreSQL (and RabbitMQ when
// TEST_AMQP_URL is set), under a steady mix of REST reads, GraphQL reads (a document per request,
// a persisted operation by its hash alone, over WebSocket), REST and GraphQL writes, webhook
// deliveries to a loopback receiver and GraphQL subscriptions over SSE and over WebSocket, for
// SOAK_SECONDS (default 600). It samples the process's RSS every 5 s and reports the RSS after the
// first minute against the RSS at the end (target: within 15 %), the request count per kind and
// every error. Exit code 1 when a request failed, a webhook or a subscriber missed a create's event
// or RSS grew past the target.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \
//   TEST_AMQP_URL=amqp://guest:guest@127.0.0.1:5672 npx tsx bench/soak.ts
//
// SOAK_SECONDS (600), SOAK_WORKERS (8 concurrent request loops, each with a WebSocket of its own),
// SOAK_SUBSCRIBERS (4 over SSE and 4 over WebSocket), SOAK_RATE (requests a second over all loops;
// 0, the default, runs them flat out). The service keeps its default limits, the rate limits off.
// Traffic goes to loopback only; every loop stops at the deadline. Besides RSS it samples the V8
// heap in use from /metrics, so growth of the heap (a leak) can be told from growth of the
// allocator's reserve.
import { createHash, createHmac } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import { loginOverHttp, UNLIMITED_ENV } from "../test/helpers/auth.ts";
import { TEST_AMQP_URL, TEST_JWT_SECRET } from "../test/helpers/env.ts";
import { sseBlocks } from "../test/graphql/sse.ts";
import { authenticatedClient, type GraphQLSocket, graphqlSocket } from "../test/graphql/ws.ts";
import { freePort, spawnStart, waitReady } from "../test/helpers/process.ts";
import { openBenchServices, seedCustomers } from "./seed.ts";

const SECONDS = Number(process.env.SOAK_SECONDS ?? 600);
const WORKERS = Number(process.env.SOAK_WORKERS ?? 8);
const SUBSCRIBERS = Number(process.env.SOAK_SUBSCRIBERS ?? 4);
const RATE = Number(process.env.SOAK_RATE ?? 0);
const SAMPLE_MS = 5_000;
const WEBHOOK_SECRET = "soak-webhook-secret-0123456789";

function rssMb(pid: number): number {
  const line = readFileSync(`/proc/${pid}/status`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("VmRSS:"));
  return Math.round(Number(line?.split(/\s+/)[1] ?? 0) / 1024);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}

/** A webhook receiver on loopback: counts deliveries whose signature checks out, and bad ones. */
async function startReceiver() {
  const received = new Set<string>();
  let badSignatures = 0;
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const expected = createHmac("sha256", WEBHOOK_SECRET).update(body).digest("hex");
    const given = String(req.headers["x-service-signature"] ?? "");
    if (given !== `sha256=${expected}`) badSignatures++;
    const id = String(req.headers["x-service-event-id"] ?? "");
    received.add(id);
    res.writeHead(204).end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    received,
    badSignatures: () => badSignatures,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

interface Subscriber {
  state: { events: number; errors: number; ended: boolean };
  done: Promise<void>;
}

/** A GraphQL subscription over SSE that counts the events it receives until aborted. */
function subscribeOverSse(base: string, token: string, query: string, signal: AbortSignal): Subscriber {
  const state = { events: 0, errors: 0, ended: false };
  const done = (async () => {
    try {
      const res = await fetch(`${base}/graphql`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${token}`,
          "content-type": "application/json",
          accept: "text/event-stream",
        },
        body: JSON.stringify({ query }),
        signal,
      });
      if (res.status !== 200 || !res.body) {
        state.errors++;
        return;
      }
      for await (const block of sseBlocks(res.body)) {
        if (!block.includes("data:")) continue;
        if (block.includes('"errors"')) state.errors++;
        else if (!block.startsWith("event: complete")) state.events++;
      }
    } catch (err) {
      if (!signal.aborted) state.errors++;
      void err;
    } finally {
      state.ended = true;
    }
  })();
  return { state, done };
}

/**
 * A GraphQL subscription over WebSocket (the `graphql-ws` client, a socket of its own) that counts
 * the events it receives until aborted; a close or an error result counts as an error.
 */
function subscribeOverWebSocket(url: string, token: string, query: string, signal: AbortSignal): Subscriber {
  const state = { events: 0, errors: 0, ended: false };
  const client = authenticatedClient(url, token);
  const done = new Promise<void>((resolve) => {
    const end = () => {
      state.ended = true;
      resolve();
    };
    client.subscribe(
      { query },
      {
        next: (result) => {
          if (result.errors) state.errors++;
          else state.events++;
        },
        error: () => {
          if (!signal.aborted) state.errors++;
          end();
        },
        complete: end,
      },
    );
    signal.addEventListener("abort", () => void Promise.resolve(client.dispose()).finally(end), {
      once: true,
    });
  });
  return { state, done };
}

/** What one request of a kind found wrong, or null when it answered as it should. */
type Outcome = string | null;

interface Tally {
  ok: number;
  errors: number;
  firstErrors: string[];
}

async function main() {
  const services = await openBenchServices();
  if (services.db.kind !== "postgres") throw new Error("PostgreSQL expected");
  const databaseUrl = services.db.connectionString;
  await seedCustomers(services.db, 2_000, ["MI", "RM", "TO", "MUC"]);
  const receiver = await startReceiver();
  const port = await freePort();
  const running = spawnStart({
    ...UNLIMITED_ENV,
    DATABASE_URL: databaseUrl,
    ...(TEST_AMQP_URL ? { AMQP_URL: TEST_AMQP_URL } : {}),
    JWT_SECRET: TEST_JWT_SECRET,
    DEMO_DATA: "false",
    LOG_LEVEL: "warn",
    PORT: String(port),
    DATA_DIR: `/tmp/dimensio-soak-${process.pid}`,
    WEBHOOK_ALLOW_PRIVATE: "true",
  });
  const base = `http://127.0.0.1:${port}`;
  const pid = running.child.pid!;
  const tallies = new Map<string, Tally>();
  const rss: Array<{ at: number; mb: number; heapMb: number; heapTotalMb: number; externalMb: number }> = [];
  const abort = new AbortController();
  try {
    await waitReady(base, running);
    const anna = await loginOverHttp(base, "anna", "anna-secret-1");
    const greta = await loginOverHttp(base, "greta", "greta-secret-4");
    const hook = await fetch(`${base}/api/v4/webhooks`, {
      method: "POST",
      headers: { authorization: `Bearer ${anna}`, "content-type": "application/json" },
      body: JSON.stringify({ url: receiver.url, events: ["CUSTCreated"], secret: WEBHOOK_SECRET }),
    });
    if (hook.status !== 201)
      throw new Error(`webhook registration answered ${hook.status}: ${await hook.text()}`);

    const eventsQuery = `subscription { CUST_events(source: "anag-1") { event_id event_type record_id } }`;
    const wsUrl = `ws://127.0.0.1:${port}/graphql`;
    const subscriptions = [
      ...Array.from({ length: SUBSCRIBERS }, () => subscribeOverSse(base, anna, eventsQuery, abort.signal)),
      ...Array.from({ length: SUBSCRIBERS }, () =>
        subscribeOverWebSocket(wsUrl, anna, eventsQuery, abort.signal),
      ),
    ];

    const json = { "content-type": "application/json" };
    const as = (token: string) => ({ authorization: `Bearer ${token}` });
    let n = 0;
    let persistedRuns = 0;
    /** A request over HTTP: an error status, or GraphQL errors in a 200, is what it found wrong. */
    const http = async (url: string, init: RequestInit = {}): Promise<Outcome> => {
      const res = await fetch(url, init);
      const text = await res.text();
      const bad = res.status >= 400 || (url.endsWith("/graphql") && text.includes('"errors"'));
      return bad ? `${res.status} ${text.slice(0, 300)}` : null;
    };
    const gql = (token: string, body: Record<string, unknown>): Promise<Outcome> =>
      http(`${base}/graphql`, {
        method: "POST",
        headers: { ...as(token), ...json },
        body: JSON.stringify(body),
      });
    const createCust = () =>
      gql(anna, {
        query: `mutation { CUST_create(source: "anag-1", data: {NAME: "Soak G ${++n}", CODE: "SG-${process.pid}-${n}"}) { data { CUST_ID } } }`,
      });

    // A persisted operation (automatic persisted queries): registered once with its document, then
    // sent by its hash alone with a variable of its own each time.
    const persistedQuery = `query ($city: String!) { CUST(source: "anag-1", where: {CITY_ID: {_eq: $city}}, order_by: [{NAME: asc}], limit: 20) { data { CUST_ID NAME } meta { has_more } } }`;
    const persisted = {
      persistedQuery: { version: 1, sha256Hash: createHash("sha256").update(persistedQuery).digest("hex") },
    };
    const registered = await gql(anna, {
      query: persistedQuery,
      variables: { city: "MI" },
      extensions: persisted,
    });
    if (registered) throw new Error(`registering the persisted operation answered ${registered}`);

    // Every loop's own WebSocket (graphql-ws), opened at its first operation over it.
    const sockets: GraphQLSocket[] = [];
    const socketOf = (w: number) => (sockets[w] ??= graphqlSocket(wsUrl, anna));

    const kinds: Array<[string, (w: number) => Promise<Outcome>]> = [
      [
        "REST list",
        () =>
          http(`${base}/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI&sort=NAME&$num_rows=20`, {
            headers: as(anna),
          }),
      ],
      [
        "REST list (other tenant)",
        () => http(`${base}/api/v4/core/CUST?source=anag-1&$num_rows=5`, { headers: as(greta) }),
      ],
      [
        "GraphQL list + relation",
        () =>
          gql(anna, {
            query: `{ ORD(source: "sales-1", order_by: [{ORD_ID: desc}], limit: 10) { data { ORD_ID ORD_NO CUST { NAME } } } }`,
          }),
      ],
      [
        "REST create",
        () =>
          http(`${base}/api/v4/core/CUST?source=anag-1`, {
            method: "POST",
            headers: { ...as(anna), ...json },
            body: JSON.stringify({ data: { NAME: `Soak ${++n}`, CODE: `S-${process.pid}-${n}` } }),
          }),
      ],
      ["GraphQL create", createCust],
      [
        "REST count",
        () => http(`${base}/api/v4/core/CUST/count?source=anag-1&filter[CITY_ID]=RM`, { headers: as(anna) }),
      ],
      [
        "GraphQL persisted (hash alone)",
        () =>
          gql(anna, { variables: { city: ["MI", "RM", "TO"][persistedRuns++ % 3] }, extensions: persisted }),
      ],
      [
        "GraphQL over WebSocket",
        async (w) => {
          const answer = await socketOf(w).run({
            query: `{ CUST(source: "anag-1", order_by: [{CUST_ID: desc}], first: 10) { data { CUST_ID NAME } meta { end_cursor } } }`,
          });
          const failed = answer.errors ?? answer.results.find((r) => r.errors)?.errors;
          return failed ? JSON.stringify(failed).slice(0, 300) : null;
        },
      ],
    ];
    for (const [kind] of kinds) tallies.set(kind, { ok: 0, errors: 0, firstErrors: [] });

    // Every subscriber is live before the loops start: creates until each has had an event (a
    // subscription still on its way misses one), then one more that each must get, which settles
    // their counts. Bounded: 30 s.
    const liveBy = Date.now() + 30_000;
    let warmUpCreates = 0;
    const until = async (done: () => boolean, ms: number) => {
      const by = Math.min(liveBy, Date.now() + ms);
      while (!done() && Date.now() < by) {
        if (subscriptions.some((s) => s.state.ended)) throw new Error("a subscription ended before the soak");
        await new Promise((r) => setTimeout(r, 50));
      }
      return done();
    };
    const warmUpCreate = async () => {
      const failed = await createCust();
      if (failed) throw new Error(`a warm-up create answered ${failed}`);
      warmUpCreates++;
    };
    do await warmUpCreate();
    while (
      !(await until(() => subscriptions.every((s) => s.state.events > 0), 1_000)) &&
      Date.now() < liveBy
    );
    const before = subscriptions.map((s) => s.state.events);
    await warmUpCreate();
    if (!(await until(() => subscriptions.every((s, i) => s.state.events === before[i]! + 1), 30_000)))
      throw new Error("the subscribers did not all receive the warm-up creates' events within 30 s");
    const warmUpEvents = subscriptions.map((s) => s.state.events);

    const started = Date.now();
    const deadline = started + SECONDS * 1000;
    const sample = async () => {
      const at = Date.now() - started;
      const mb = rssMb(pid);
      const metrics = await fetch(`${base}/metrics`).then(
        (r) => r.text(),
        () => "",
      );
      const gauge = (name: string) =>
        Math.round(
          Number(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, "m").exec(metrics)?.[1] ?? 0) / 1048576,
        );
      rss.push({
        at,
        mb,
        heapMb: gauge("dimensio_nodejs_heap_size_used_bytes"),
        heapTotalMb: gauge("dimensio_nodejs_heap_size_total_bytes"),
        externalMb: gauge("dimensio_nodejs_external_memory_bytes"),
      });
    };
    const sampler = setInterval(() => void sample(), SAMPLE_MS);
    const gap = RATE > 0 ? (1000 * WORKERS) / RATE : 0;
    async function worker(w: number) {
      let i = w;
      let next = Date.now();
      while (Date.now() < deadline) {
        if (gap > 0) {
          next += gap;
          const wait = next - Date.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
        const [kind, run] = kinds[i++ % kinds.length]!;
        const tally = tallies.get(kind)!;
        let found: Outcome;
        try {
          found = await run(w);
        } catch (err) {
          found = String(err);
        }
        if (found === null) tally.ok++;
        else {
          tally.errors++;
          if (tally.firstErrors.length < 3) tally.firstErrors.push(found);
        }
      }
    }
    await Promise.all(Array.from({ length: WORKERS }, (_, w) => worker(w)));
    clearInterval(sampler);
    await sample();

    // Every create's event arrives (bounded wait): a signed webhook delivery each (the warm-up
    // creates' too), and at every subscriber, past the events it had before the loops.
    const creates = (tallies.get("REST create")?.ok ?? 0) + (tallies.get("GraphQL create")?.ok ?? 0);
    const missed = () => subscriptions.filter((s, i) => s.state.events < warmUpEvents[i]! + creates).length;
    const catchUp = Date.now() + 60_000;
    while ((receiver.received.size < creates + warmUpCreates || missed() > 0) && Date.now() < catchUp)
      await new Promise((r) => setTimeout(r, 250));
    abort.abort();
    await Promise.allSettled(subscriptions.map((s) => s.done));
    for (const socket of sockets) await socket.dispose();

    const afterMinute = rss.find((s) => s.at >= 60_000) ?? rss[0]!;
    const end = rss[rss.length - 1]!;
    const growth = (end.mb - afterMinute.mb) / afterMinute.mb;
    const requestErrors = [...tallies.values()].reduce((a, t) => a + t.errors, 0);
    const subscriptionErrors = subscriptions.reduce((a, s) => a + s.state.errors, 0);
    const cpu = readFileSync("/proc/loadavg", "utf8").trim();
    console.log(
      `\n## Soak: ${SECONDS} s, ${WORKERS} request loops, ${SUBSCRIBERS} subscriptions over SSE and ${SUBSCRIBERS} over WebSocket (${TEST_AMQP_URL ? "RabbitMQ" : "in-process bus"})\n`,
    );
    console.log(`load average at the end: ${cpu}\n`);
    console.log("| kind | ok | errors |\n|---|---:|---:|");
    for (const [kind, t] of tallies) console.log(`| ${kind} | ${t.ok} | ${t.errors} |`);
    console.log(`\n| measure | value |\n|---|---:|`);
    console.log(`| RSS after the first minute | ${afterMinute.mb} MB |`);
    console.log(`| RSS at the end | ${end.mb} MB (${(growth * 100).toFixed(1)} %) |`);
    console.log(`| peak RSS sampled | ${Math.max(...rss.map((s) => s.mb))} MB |`);
    console.log(
      `| V8 heap in use after the first minute / at the end | ${afterMinute.heapMb} / ${end.heapMb} MB |`,
    );
    console.log(
      `| creates (and warm-up creates) / webhook deliveries received | ${creates} (${warmUpCreates}) / ${receiver.received.size} |`,
    );
    console.log(`| webhook deliveries with a bad signature | ${receiver.badSignatures()} |`);
    console.log(
      `| subscription events received (all subscribers) | ${subscriptions.reduce((a, s) => a + s.state.events, 0)} |`,
    );
    console.log(`| subscribers that missed a create's event | ${missed()} |`);
    console.log(`| subscription errors | ${subscriptionErrors} |`);
    console.log(
      "\n| minute | RSS MB | heap used MB | heap total MB | external MB |\n|---:|---:|---:|---:|---:|",
    );
    for (const s of rss.filter(
      (s, i) =>
        i === rss.length - 1 || Math.floor(s.at / 60_000) !== Math.floor((rss[i + 1]?.at ?? 0) / 60_000),
    ))
      console.log(
        `| ${(s.at / 60_000).toFixed(1)} | ${s.mb} | ${s.heapMb} | ${s.heapTotalMb} | ${s.externalMb} |`,
      );
    for (const [kind, t] of tallies) for (const e of t.firstErrors) console.log(`error (${kind}): ${e}`);
    const failed =
      requestErrors > 0 ||
      subscriptionErrors > 0 ||
      receiver.received.size < creates + warmUpCreates ||
      missed() > 0 ||
      receiver.badSignatures() > 0 ||
      growth > 0.15;
    process.exitCode = failed ? 1 : 0;
  } finally {
    abort.abort();
    running.child.kill("SIGTERM");
    await running.exited;
    await receiver.close();
    await services.close();
  }
}

await main();
