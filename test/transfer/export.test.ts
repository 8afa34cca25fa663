// GET /api/v4/core/{dim}/export (decisions §20): CSV, NDJSON and JSON bodies equal to what the list
// answers (field visibility, filters, $filter, sort), every page in order, and a slow client: the
// service reads a page only when the client takes the previous ones, holds the tenant's heavy lane
// meanwhile and leaves it when the client goes away.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { parse as parseCsv } from "csv-parse/sync";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { heavyGauge } from "../robustness/support.ts";
import { addField, sampleFixtureWith } from "../write/helpers.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

const GENERATED = 10_000;
const BIO_BYTES = 2_000;
const PAGE_ROWS = 500;

/**
 * Until the service's export response waits for its client (the sockets' buffers full); fails at
 * once, saying how, if the response ends first (an export cut short, or finished whole).
 */
async function untilBuffersFill(res: http.ServerResponse): Promise<void> {
  if (res.writableNeedDrain) return;
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => {
      if (!res.writableNeedDrain) return;
      settle();
      resolve();
    }, 20);
    const onClose = () => {
      settle();
      reject(
        new Error(
          `the export's response closed before its client's buffers filled: status ${res.statusCode}, finished ${res.writableFinished}, ${res.socket?.bytesWritten ?? "?"} bytes written`,
        ),
      );
    };
    const settle = () => {
      clearInterval(timer);
      res.off("close", onClose);
    };
    res.once("close", onClose);
  });
}

describe.each(BACKENDS)("export (%s)", (backend) => {
  let t: TestApp;
  let anna: string;
  let lucia: string;
  let pageStatements = 0;
  let base: string;
  /** The server side of the export requests, to read what they hold unsent. */
  const responses: http.ServerResponse[] = [];

  beforeAll(async () => {
    const fixture = await sampleFixtureWith((f) =>
      addField(f, "CUST", 20, { COD_VAR: "BIO", DESC_VAR: "Bio", DATA_TYPE: "TEXT", LENGTH: 10_000 }),
    );
    t = await createTestApp(backend, {
      fixture,
      env: { ...NO_RATE_LIMITS, STATEMENT_TIMEOUT_MS: "120000" },
      onStatement: (text) => {
        if (text.includes(`FROM "TB_ANAG_CUST00" AS t`) && text.includes("LIMIT")) pageStatements++;
      },
    });
    [anna, lucia] = await Promise.all([
      loginAs(t.app, "anna", "anna-secret-1"),
      loginAs(t.app, "lucia", "lucia-secret-3"),
    ]);
    await t.app.listen({ port: 0, host: "127.0.0.1" });
    base = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`;
    t.app.server.on("request", (req: http.IncomingMessage, res: http.ServerResponse) => {
      if (req.url?.includes("/export")) responses.push(res);
    });
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (url: string, token = anna) => t.app.inject({ method: "GET", url, headers: bearer(token) });
  const list = async (query: string, token = anna) =>
    (await get(`/api/v4/core/CUST?source=anag-1&$num_rows=1000&${query}`, token)).json().data as Array<
      Record<string, unknown>
    >;

  it("CSV: a header of the listed fields, values in their REST JSON form, nulls empty, empty text quoted", async () => {
    await t.services.db.query(
      `UPDATE "TB_ANAG_CUST00" SET "SALES_REP" = '' WHERE "TENANT_ID" = 'acme' AND "CUST_ID" = 1`,
    );
    const res = await get("/api/v4/core/CUST/export?source=anag-1");
    expect(res.statusCode).toBe(200);
    expect(res.headers["content-type"]).toBe("text/csv; charset=utf-8");
    expect(res.headers["content-disposition"]).toBe('attachment; filename="CUST.csv"');
    const listed = await list("");
    const [header, ...rows] = res.body.split("\r\n").filter((l) => l !== "");
    expect(header!.split(",")).toEqual(Object.keys(listed[0]!));
    expect(rows).toHaveLength(listed.length);
    const records = parseCsv(res.body, { columns: true }) as Array<Record<string, string>>;
    const first = records.find((r) => r.CUST_ID === "1")!;
    expect(first).toMatchObject({ NAME: "Rossi Srl", CREDIT_LIMIT: "50000", VIP: "true", SALES_REP: "" });
    // The raw line: the null LDATA is empty, the empty SALES_REP is "".
    expect(rows[0]).toMatch(/^1,C-00001,Rossi Srl,MI,50000,true,"",,N,\d{14},system,,$/);
  });

  it("NDJSON and JSON: the records the list answers, with its filters, $filter and sort", async () => {
    const query = "filter[CITY_ID][$in]=MI,RM&$filter=CREDIT_LIMIT gt 1000 or VIP eq true&sort=-NAME";
    const listed = await list(query);
    expect(listed.length).toBeGreaterThan(1);
    const nd = await get(`/api/v4/core/CUST/export?source=anag-1&format=ndjson&${query}`);
    expect(nd.headers["content-type"]).toBe("application/x-ndjson");
    const lines = nd.body.split("\n");
    expect(lines.at(-1)).toBe("");
    expect(lines.slice(0, -1).map((l) => JSON.parse(l))).toEqual(listed);
    const json = await get(`/api/v4/core/CUST/export?source=anag-1&format=json&${query}`);
    expect(json.headers["content-type"]).toBe("application/json; charset=utf-8");
    expect(json.json()).toEqual(listed);
    const none = await get("/api/v4/core/CUST/export?source=anag-1&format=json&filter[NAME]=nobody");
    expect(none.json()).toEqual([]);
    expect((await get("/api/v4/core/CUST/export?source=anag-1&filter[NAME]=nobody")).body).toMatch(
      /^CUST_ID,CODE,NAME,/,
    );
  });

  it("follows the caller's field visibility (peso) as the list does", async () => {
    const listed = await list("", lucia);
    expect(Object.keys(listed[0]!)).not.toContain("CREDIT_LIMIT");
    const res = await get("/api/v4/core/CUST/export?source=anag-1", lucia);
    expect(res.statusCode).toBe(200);
    expect(res.body.split("\r\n")[0]!.split(",")).toEqual(Object.keys(listed[0]!));
    const named = await get("/api/v4/core/CUST/export?source=anag-1&$fields=NAME,CREDIT_LIMIT", lucia);
    expect(named.statusCode).toBe(400);
    expect(named.json()).toMatchObject({ code: "INVALID_FIELD", field: "CREDIT_LIMIT" });
    const fields = await get("/api/v4/core/CUST/export?source=anag-1&format=json&$fields=NAME", lucia);
    expect(Object.keys(fields.json()[0])).toEqual(["NAME"]);
    // `fields`, as spec decisions §20 names it, is the same parameter (it was ignored).
    const plain = await get("/api/v4/core/CUST/export?source=anag-1&format=json&fields=NAME", lucia);
    expect(Object.keys(plain.json()[0])).toEqual(["NAME"]);
    const hidden = await get("/api/v4/core/CUST/export?source=anag-1&fields=NAME,CREDIT_LIMIT", lucia);
    expect(hidden.json()).toMatchObject({ code: "INVALID_FIELD", field: "CREDIT_LIMIT" });
    const both = await get("/api/v4/core/CUST/export?source=anag-1&fields=NAME&$fields=NAME", lucia);
    expect(both.statusCode).toBe(400);
  });

  it("is described in the caller's OpenAPI document, with the import", async () => {
    const doc = (await get("/api/v4/openapi.json")).json();
    expect(doc.paths["/api/v4/core/CUST/export"].get.operationId).toBe("export_CUST");
    expect(Object.keys(doc.paths["/api/v4/core/CUST/import"].post.requestBody.content)).toEqual([
      "text/csv",
      "application/x-ndjson",
    ]);
  });

  it("refuses what an export does not take, and a caller without read", async () => {
    const messages: Record<string, string> = {};
    for (const [query, field] of [
      ["$num_rows=5", "$num_rows"],
      ["$offset=5", "$offset"],
      ["$count=true", "$count"],
      ["$group=CITY_ID", "$group"],
      ["$expand=CITY", "$expand"],
      ["include=CITY", "include"],
      ["debug=true", "debug"],
      ["format=xml", "format"],
    ]) {
      const res = await get(`/api/v4/core/CUST/export?source=anag-1&${query}`);
      expect(res.statusCode, query).toBe(400);
      expect(res.json()).toMatchObject({ code: "INVALID_PARAMETER", field });
      messages[field!] = res.json().message;
    }
    // Each refusal says why the export does not take it.
    expect(messages.$num_rows).toMatch(/no row limit nor pages: it writes every row the list matches/);
    expect(messages.$expand).toMatch(
      /dimension's own fields, one line per record: a related record has no column/,
    );
    expect(messages.debug).toMatch(/rows alone, with no envelope to carry the generated query/);
    expect(messages.$count).toMatch(/GET \/\{dim\}\/count/);
    expect(new Set([messages.$num_rows, messages.$expand, messages.debug, messages.$count]).size).toBe(4);
    expect((await get("/api/v4/core/ORD/export?source=anag-1", lucia)).statusCode).toBe(403);
    expect((await get("/api/v4/core/NOPE/export?source=anag-1")).statusCode).toBe(404);
  });

  it("reads every page, in the sort's order across page boundaries (a nullable key, NULL last)", async () => {
    await t.services.db.query(
      `INSERT INTO "TB_ANAG_CUST00" ("TENANT_ID", "CODE", "NAME", "CITY_ID", "BIO", "TREC")
       SELECT 'acme', 'G-' || g, 'Gen ' || lpad((g % 997)::text, 4, '0'),
              CASE g % 3 WHEN 0 THEN 'MI' WHEN 1 THEN 'RM' ELSE NULL END, repeat('x', ${BIO_BYTES}), 'N'
       FROM generate_series(1, ${GENERATED}) AS g`,
    );
    await t.services.db.query(`ANALYZE "TB_ANAG_CUST00"`);
    const expected = (
      await t.services.db.query<{ CUST_ID: number }>(
        `SELECT "CUST_ID" FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' AND "NAME" LIKE 'Gen %'
         ORDER BY "CITY_ID" DESC NULLS LAST, "NAME" ASC, "CUST_ID" ASC`,
      )
    ).rows.map((r) => Number(r.CUST_ID));
    expect(expected).toHaveLength(GENERATED);
    const before = pageStatements;
    const res = await get(
      "/api/v4/core/CUST/export?source=anag-1&format=ndjson&$fields=CUST_ID,CITY_ID&filter[NAME][$like]=Gen %25&sort=-CITY_ID,NAME",
    );
    const ids = res.body
      .split("\n")
      .filter((l) => l !== "")
      .map((l) => JSON.parse(l).CUST_ID as number);
    expect(ids).toEqual(expected);
    // One statement per page of 500, and one that finds the end.
    expect(pageStatements - before).toBe(GENERATED / PAGE_ROWS + 1);
  });

  it("a client that does not read holds the export: pages are read at its pace, in the tenant's heavy lane", async () => {
    const before = pageStatements;
    const total = GENERATED / PAGE_ROWS;
    const pageBytes = BIO_BYTES * PAGE_ROWS;
    let received = 0;
    const request = http.get(
      `${base}/api/v4/core/CUST/export?source=anag-1&format=ndjson&$fields=CUST_ID,BIO&filter[NAME][$like]=Gen %25`,
      // A connection of its own (no keep-alive socket another test used).
      { headers: bearer(anna), agent: false },
    );
    try {
      const response = await new Promise<http.IncomingMessage>((resolve) =>
        request.once("response", resolve),
      );
      expect(response.statusCode).toBe(200);
      // Not read: the sockets' buffers fill, then the service's response waits for them to drain.
      response.pause();
      const res = responses.at(-1)!;
      await untilBuffersFill(res);
      // Round trips through the service meanwhile: the export stays in the tenant's lane, its reads
      // stay far from the whole (what was read went to the kernel's socket buffers), and the
      // service holds at most about a page unsent.
      for (let i = 0; i < 3; i++) {
        expect(await heavyGauge(t, "running")).toBe(1);
        expect(pageStatements - before).toBeLessThan(total);
        expect(res.writableLength).toBeLessThan(2 * pageBytes);
      }
      // The client reads on: every row comes, and the lane is free once the body ends.
      response.on("data", (chunk: Buffer) => {
        for (let i = chunk.indexOf(10); i >= 0; i = chunk.indexOf(10, i + 1)) received++;
      });
      response.resume();
      await new Promise((resolve) => response.once("end", resolve));
      expect(received).toBe(GENERATED);
      expect(pageStatements - before).toBe(total + 1);
      await vi.waitFor(async () => expect(await heavyGauge(t, "running")).toBe(0), { timeout: 10_000 });
    } finally {
      request.destroy();
    }
  });

  it("a client that goes away ends the export and leaves the heavy lane", async () => {
    const before = pageStatements;
    const request = http.get(
      `${base}/api/v4/core/CUST/export?source=anag-1&format=csv&$fields=CUST_ID,BIO&filter[NAME][$like]=Gen %25`,
      { headers: bearer(anna), agent: false },
    );
    const response = await new Promise<http.IncomingMessage>((resolve) => request.once("response", resolve));
    response.pause();
    expect(response.statusCode).toBe(200);
    const res = responses.at(-1)!;
    try {
      await untilBuffersFill(res);
      expect(await heavyGauge(t, "running")).toBe(1);
    } finally {
      request.destroy();
    }
    await new Promise((resolve) => res.once("close", resolve));
    await vi.waitFor(async () => expect(await heavyGauge(t, "running")).toBe(0), { timeout: 10_000 });
    const read = pageStatements - before;
    // The lane is free for the tenant's next heavy request, and the abandoned export reads no more.
    const next = await get("/api/v4/core/CUST/export?source=anag-1&format=json&filter[NAME]=Rossi Srl");
    expect(next.json()).toHaveLength(1);
    expect(pageStatements - before).toBe(read + 1);
    expect(read).toBeLessThan(GENERATED / PAGE_ROWS);
  });
});
