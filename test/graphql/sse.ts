// A GraphQL-over-SSE client for tests (real HTTP, fetch): the results as they arrive, a wait for
// the n-th, and whether the server ended the stream (yoga's `complete` event, then the close).

export interface SseEvent {
  event: string;
  // biome-ignore lint/suspicious/noExplicitAny: GraphQL results are inspected freely
  data: any;
}

export interface SseSubscription {
  status: number;
  contentType: string | null;
  events: SseEvent[];
  /** Resolves once the server closed the stream. */
  closed: Promise<void>;
  isClosed(): boolean;
  waitFor(n: number, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

/** The blocks of a server-sent event stream (the text between blank lines), as they arrive. */
export async function* sseBlocks(body: ReadableStream<BufferSource>): AsyncGenerator<string> {
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
      yield buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
    }
  }
}

export async function subscribe(base: string, token: string, query: string): Promise<SseSubscription> {
  const controller = new AbortController();
  const res = await fetch(`${base}/graphql`, {
    method: "POST",
    headers: {
      authorization: `Bearer ${token}`,
      "content-type": "application/json",
      accept: "text/event-stream",
    },
    body: JSON.stringify({ query }),
    signal: controller.signal,
  });
  const events: SseEvent[] = [];
  const waiters = new Set<() => void>();
  let ended = false;
  const reading = (async () => {
    try {
      for await (const block of sseBlocks(res.body!)) {
        let event = "message";
        let data = "";
        for (const line of block.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        if (!data) continue;
        events.push({ event, data: JSON.parse(data) });
        for (const w of waiters) w();
      }
    } catch {
      // aborted
    } finally {
      ended = true;
    }
  })();
  return {
    status: res.status,
    contentType: res.headers.get("content-type"),
    events,
    closed: reading,
    isClosed: () => ended,
    waitFor(n, timeoutMs = 10_000) {
      if (events.length >= n) return Promise.resolve();
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out with ${events.length} events`)),
          timeoutMs,
        );
        const w = () => {
          if (events.length < n) return;
          clearTimeout(timer);
          waiters.delete(w);
          resolve();
        };
        waiters.add(w);
      });
    },
    async close() {
      controller.abort();
      await reading;
    },
  };
}
