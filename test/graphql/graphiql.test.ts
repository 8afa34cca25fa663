// GraphiQL in a real browser (a headless Chromium driven by playwright-core: the one that the
// @sparticuz/chromium package ships, or Debian's; test/helpers/chromium.ts): the page is served
// from the project's own files without a token, a token pasted in its Headers tab is sent as the
// Authorization header, and a query typed into it returns data. A screenshot is kept under
// test-output/ (not committed).
import { mkdir } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { type Browser, chromium } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { chromiumToLaunch } from "../helpers/chromium.ts";
import { createTestApp, type TestApp } from "../helpers/env.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

const OUTPUT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../test-output");

describe("GraphiQL in headless Chromium", () => {
  let t: TestApp;
  let browser: Browser;
  let base: string;

  beforeAll(async () => {
    const chromiumBinary = await chromiumToLaunch();
    t = await createTestApp("pglite", { fixture: "sample", env: NO_RATE_LIMITS });
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
    await t?.close();
  });

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
});
