// GraphiQL in a real browser (a headless Chromium driven by playwright-core: the one that the
// @sparticuz/chromium package ships, or Debian's; test/helpers/chromium.ts): the page is served
// from the project's own files without a token, a token pasted in its Headers tab is sent as the
// Authorization header, and a query typed into it returns data; a subscription typed into it runs
// over the WebSocket (graphql-transport-ws), the pasted token in its connection_init, and shows an
// event as it is published. Screenshots are kept under test-output/ (not committed).
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, chromium, type Locator, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type EventRuntime, startEventRuntime } from "../../src/events/runtime.ts";
import { eventually } from "../events/support.ts";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { chromiumToLaunch } from "../helpers/chromium.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { client, NO_RATE_LIMITS } from "../write/http.ts";

const OUTPUT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../test-output");

describe("GraphiQL in headless Chromium", () => {
  let t: TestApp;
  let browser: Browser;
  let base: string;
  let runtime: EventRuntime;

  beforeAll(async () => {
    const chromiumBinary = await chromiumToLaunch();
    t = await createTestApp("pglite", {
      fixture: "sample",
      env: { ...NO_RATE_LIMITS, EVENTS_POLL_MS: "60000" },
    });
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    const address = t.app.server.address();
    if (!address || typeof address === "string") throw new Error("no port");
    base = `http://127.0.0.1:${address.port}`;
    browser = await chromium.launch({
      executablePath: chromiumBinary.executablePath,
      env: chromiumBinary.env,
      args: [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  });
  afterAll(async () => {
    await browser?.close();
    await runtime?.stop();
    await t?.close();
  });

  /** Replaces the content of the editor `editor` with `text`. */
  async function replaceEditorText(page: Page, editor: Locator, text: string) {
    await editor.click();
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Delete");
    await page.keyboard.insertText(text);
  }

  it("opens without a token and runs a typed query with the pasted token", async () => {
    const token = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    const page = await browser.newPage();
    const external: string[] = [];
    // The page's own Content-Security-Policy must not block anything it needs.
    const blocked: string[] = [];
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) blocked.push(m.text());
    });
    page.on("request", (r) => {
      const url = r.url();
      if (!url.startsWith(base) && !url.startsWith("blob:") && !url.startsWith("data:")) external.push(url);
    });
    const response = await page.goto(`${base}/graphql`);
    expect(response?.status()).toBe(200);
    await page.locator(".graphiql-container").first().waitFor({ timeout: 30_000 });

    // The query editor: replace its content with a typed query.
    const queryEditor = page.locator(".graphiql-query-editor").first();
    await queryEditor.click();
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Delete");
    await page.keyboard.type(`{ CUST_count(source: "anag-1") }`);

    // The Headers tab: the token as the Authorization header.
    await page.getByText("Headers", { exact: true }).first().click();
    const headersEditor = page.locator(".graphiql-editor-tool .graphiql-editor").last();
    await headersEditor.click();
    await page.keyboard.press("Control+A");
    await page.keyboard.press("Delete");
    await page.keyboard.insertText(JSON.stringify({ Authorization: `Bearer ${token}` }));

    await page.locator(".graphiql-execute-button").click();
    const result = page.locator(".graphiql-response");
    // The response editor renders spaces as no-break spaces.
    await expect
      .poll(async () => (await result.innerText()).replace(/\s+/gu, " "), { timeout: 30_000 })
      .toContain('"CUST_count": 4');

    await mkdir(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, "graphiql.png"), fullPage: true });
    expect(external).toEqual([]);
    expect(blocked).toEqual([]);
    await page.close();
  });

  it("runs a typed subscription over the WebSocket with the pasted token, and shows a published event", async () => {
    runtime = await startEventRuntime(t.services, { relay: true });
    const token = await loginAs(t.app, "anna", SAMPLE_USERS.anna.password);
    const page = await browser.newPage();
    const blocked: string[] = [];
    page.on("console", (m) => {
      if (/Content Security Policy/i.test(m.text())) blocked.push(m.text());
    });
    // What the page sends and receives over its sockets.
    const sockets: string[] = [];
    const sent: Array<{ type: string; payload?: Record<string, unknown> }> = [];
    const received: Array<{ type: string; payload?: Record<string, unknown> }> = [];
    page.on("websocket", (ws) => {
      sockets.push(ws.url());
      ws.on("framesent", (f) => sent.push(JSON.parse(String(f.payload))));
      ws.on("framereceived", (f) => received.push(JSON.parse(String(f.payload))));
    });
    expect((await page.goto(`${base}/graphql`))?.status()).toBe(200);
    await page.locator(".graphiql-container").first().waitFor({ timeout: 30_000 });

    await replaceEditorText(
      page,
      page.locator(".graphiql-query-editor").first(),
      `subscription { CITY_events(source: "anag-3") { event_type record_id } }`,
    );
    await page.getByText("Headers", { exact: true }).first().click();
    await replaceEditorText(
      page,
      page.locator(".graphiql-editor-tool .graphiql-editor").last(),
      JSON.stringify({ Authorization: `Bearer ${token}` }),
    );
    await page.locator(".graphiql-execute-button").click();

    // The socket on the endpoint's own path, the pasted token in connection_init, acknowledged.
    await eventually(() => received.some((m) => m.type === "connection_ack"), { what: "connection_ack" });
    // The client sends its subscribe once the ack arrived: wait for that frame too.
    await eventually(() => sent.some((m) => m.type === "subscribe"), { what: "the subscribe frame" });
    expect(sockets).toEqual([`${base.replace("http:", "ws:")}/graphql`]);
    expect(sent[0]).toEqual({ type: "connection_init", payload: { authorization: `Bearer ${token}` } });
    expect(sent[1]).toMatchObject({
      type: "subscribe",
      payload: { query: expect.stringContaining("CITY_events") },
    });

    // Cities are created until one reaches the page (the subscription is live once one does).
    const writer = client(t.app, token);
    let n = 0;
    await eventually(
      async () => {
        if (received.some((m) => m.type === "next")) return true;
        const res = await writer.post("/api/v4/core/CITY?source=anag-3", {
          data: { CITY_ID: `GI${++n}`, NAME: `GraphiQL city ${n}`, COUNTRY: "IT" },
        });
        expect(res.status).toBe(201);
        return false;
      },
      { what: "an event over the socket" },
    );
    expect(received.find((m) => m.type === "next")!.payload).toEqual({
      data: { CITY_events: { event_type: "CITYCreated", record_id: expect.stringMatching(/^GI\d+$/) } },
    });
    const result = page.locator(".graphiql-response");
    await expect
      .poll(async () => (await result.innerText()).replace(/\s+/gu, " "), { timeout: 30_000 })
      .toContain('"event_type": "CITYCreated"');

    await mkdir(OUTPUT, { recursive: true });
    await page.screenshot({ path: path.join(OUTPUT, "graphiql-subscription.png"), fullPage: true });

    // Reopened, GraphiQL shows the headers it stored: their token goes in connection_init unedited.
    // GraphiQL stores the headers a moment after they are edited: reload once they are stored.
    await expect
      .poll(async () => page.evaluate(() => localStorage.getItem("graphiql:headers")), { timeout: 30_000 })
      .toContain(token);
    sent.length = 0;
    received.length = 0;
    await page.reload();
    await page.locator(".graphiql-container").first().waitFor({ timeout: 30_000 });
    // GraphiQL restores the stored document after the page is up: run it once it is back.
    await expect
      .poll(async () => page.locator(".graphiql-query-editor").first().innerText(), { timeout: 30_000 })
      .toContain("CITY_events");
    await page.locator(".graphiql-execute-button").click();
    await eventually(() => received.some((m) => m.type === "connection_ack"), {
      what: "connection_ack after a reload",
    });
    expect(sent[0]).toEqual({ type: "connection_init", payload: { authorization: `Bearer ${token}` } });
    expect(blocked).toEqual([]);
    await page.close();
  });
});
