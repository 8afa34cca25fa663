// Bytes allocated per REST request, by owner (issue 19): V8's sampling heap profiler with the
// objects later collected included, over BENCH_REQUESTS requests of one URL through app.inject.
// The owner of an allocation is the nearest package or src/ function on its stack (code V8 made
// at run time, as fast-json-stringify's serializers, counts for its caller). Counted, not timed.
//
//   TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres npx tsx bench/rest-alloc.ts
//   BENCH_URL='/api/v4/core/CUST/5000?source=anag-1' …   (W2; the default is W3)
//   BENCH_METHOD=POST BENCH_URL=/api/v4/core/CUST?source=anag-1 BENCH_BODY='{"data":{"NAME":"x"}}' …
//   BENCH_METHOD=POST BENCH_URL=/graphql BENCH_BODY=w4 …   (W4 over GraphQL; BENCH_BODY=w4 alone:
//   the GraphQL mutation bench/compare sends). A create's event side (relay, subscribers) runs in
//   the same process and is counted with it: sampling stops once every event was published.
//   BENCH_DETAIL=@envelop/core: that package's bytes by function and line; BENCH_SURVIVORS=1: only
//   what outlived a young collection (what a request keeps alive, or leaves promoted).
import { Session } from "node:inspector/promises";
import { eventPartsOf, startEventRuntime } from "../src/events/runtime.ts";
import { bearer, loginAs } from "../test/helpers/auth.ts";
import { allEventsPublished, BENCH_CREATE_MUTATION, openBenchApp } from "./seed.ts";

const URL =
  process.env.BENCH_URL ??
  "/api/v4/core/ORD?source=sales-1&sort=-ORD_ID&$num_rows=20&$expand=CUST&$count=none";
const REQUESTS = Number(process.env.BENCH_REQUESTS ?? 1000);
const METHOD = process.env.BENCH_METHOD === "POST" ? "POST" : "GET";
const BODY =
  process.env.BENCH_BODY === "w4" ? JSON.stringify({ query: BENCH_CREATE_MUTATION }) : process.env.BENCH_BODY;

interface SampleNode {
  callFrame: { url: string; functionName: string; lineNumber: number };
  selfSize: number;
  children: SampleNode[];
}

function ownerOf(node: SampleNode, inherited: string): string {
  const { url, functionName } = node.callFrame;
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  // BENCH_DETAIL=pkg: that package's allocations by function and line.
  if (pkg && pkg[1] === process.env.BENCH_DETAIL)
    return `${pkg[1]} ${functionName} ${url.split("/").pop()}:${node.callFrame.lineNumber}`;
  if (pkg) return pkg[1]!;
  if (url.includes("/src/")) return `src/${url.split("/src/")[1]} ${functionName}`;
  return inherited;
}

async function main() {
  const bench = await openBenchApp({ customers: 6000, orders: 3000, env: { LOG_LEVEL: "warn" } });
  const { app } = bench;
  const session = new Session();
  // A create's event side runs in the process, as under `npm start` (ROLE=all).
  const events = METHOD === "POST" ? await startEventRuntime(bench.services, eventPartsOf("all")!) : null;
  try {
    const headers = bearer(await loginAs(app, "anna", "anna-secret-1"));
    const get = async () => {
      const res = await app.inject({
        method: METHOD,
        url: URL,
        headers: BODY === undefined ? headers : { ...headers, "content-type": "application/json" },
        ...(BODY === undefined ? {} : { payload: BODY }),
      });
      if (res.statusCode >= 300 || res.body.includes('"errors"'))
        throw new Error(`${URL}: ${res.statusCode} ${res.body}`);
    };
    for (let i = 0; i < 300; i++) await get();
    session.connect();
    await session.post("HeapProfiler.startSampling", {
      samplingInterval: 512,
      includeObjectsCollectedByMajorGC: true,
      // BENCH_SURVIVORS=1: only what outlived a young collection (promoted, or live at the end).
      includeObjectsCollectedByMinorGC: !process.env.BENCH_SURVIVORS,
    });
    for (let i = 0; i < REQUESTS; i++) await get();
    if (METHOD === "POST") await allEventsPublished(bench.services.db, 10_000);
    const { profile } = (await session.post("HeapProfiler.stopSampling")) as unknown as {
      profile: { head: SampleNode };
    };
    const owners = new Map<string, number>();
    let total = 0;
    const walk = (node: SampleNode, inherited: string) => {
      const owner = ownerOf(node, inherited);
      total += node.selfSize;
      owners.set(owner, (owners.get(owner) ?? 0) + node.selfSize);
      for (const child of node.children) walk(child, owner);
    };
    walk(profile.head, "(no package)");
    const kb = (bytes: number) => (bytes / REQUESTS / 1024).toFixed(1);
    console.log(`${URL}\n${kb(total)} KB allocated per request`);
    for (const [owner, bytes] of [...owners]
      .sort((a, b) => b[1] - a[1])
      .slice(0, Number(process.env.BENCH_TOP ?? 20)))
      console.log(`${kb(bytes).padStart(7)} KB  ${owner}`);
  } finally {
    session.disconnect();
    await events?.stop();
    await bench.close();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
