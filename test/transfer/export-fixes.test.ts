// GET /api/v4/core/{dim}/export, what a data migration relies on (decisions §20): a failing first
// statement is the standard error body in every format, never a 200 cut after its header; CSV
// values with line breaks, quotes or commas are quoted (RFC 4180), so that a strict reader reads
// back the values; values that look like spreadsheet formulas are written as they are; and a
// field of `fields` that a list may not show (no L) is refused naming it, never an empty column.
import { parse as parseCsv } from "csv-parse/sync";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { heavyGauge } from "../robustness/support.ts";
import { sampleFixtureWith } from "../write/helpers.ts";
import { NO_RATE_LIMITS } from "../write/http.ts";

/** NAME values a CSV must quote (RFC 4180 §2.6, §2.7), and one it need not. */
const AWKWARD: Record<number, string> = {
  1: "two\nlines",
  2: "cr\ronly",
  3: "crlf\r\nend",
  4: 'a "quoted" word',
  5: "comma, inside",
  6: "\n",
  7: "plain",
};

/** Values a spreadsheet would read as formulas (OWASP "CSV injection"). */
const FORMULAS: Record<number, string> = {
  8: '=HYPERLINK("http://example.test","x")',
  9: "+1+1",
  10: "-2+3",
  11: "@SUM(A1)",
  12: "\tTAB",
};

describe.each(BACKENDS)("export, for a migration (%s)", (backend) => {
  let t: TestApp;
  let anna: string;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: await sampleFixtureWith(() => {}), env: NO_RATE_LIMITS });
    anna = await loginAs(t.app, "anna", "anna-secret-1");
    for (const [id, name] of Object.entries({ ...AWKWARD, ...FORMULAS })) {
      await t.services.db.query(
        `INSERT INTO "TB_ANAG_CUST00" ("TENANT_ID", "CUST_ID", "CODE", "NAME", "TREC")
         VALUES ('acme', $1, $2, $3, 'N')`,
        [1000 + Number(id), `MIG-${id}`, name],
      );
    }
  });
  afterAll(async () => {
    await t?.close();
  });

  const get = (url: string) => t.app.inject({ method: "GET", url, headers: bearer(anna) });
  const MIGRATED = "filter[CODE][$like]=MIG-%25&sort=CUST_ID";

  it("a failing first statement (a NUL in $search, refused by the database) is the standard error, in every format", async () => {
    const failing = "$search=%00";
    const listed = await get(`/api/v4/core/CUST?source=anag-1&${failing}`);
    expect(listed.statusCode).toBe(400);
    expect(listed.json()).toMatchObject({ code: "INVALID_FIELD_VALUE" });
    for (const format of ["csv", "json", "ndjson"]) {
      const res = await get(`/api/v4/core/CUST/export?source=anag-1&format=${format}&${failing}`);
      expect(res.statusCode, format).toBe(400);
      expect(res.headers["content-type"], format).toMatch(/^application\/json/);
      expect(res.headers["content-disposition"], format).toBeUndefined();
      // The list's own error body, whole.
      expect(res.json(), format).toEqual(listed.json());
    }
    // Each refused export left the tenant's heavy lane.
    expect(await heavyGauge(t, "running")).toBe(0);
  });

  it("a body with no rows still has its header (CSV) or brackets (JSON), and NDJSON is empty", async () => {
    const none = "filter[NAME]=nobody";
    const csv = await get(`/api/v4/core/CUST/export?source=anag-1&fields=CUST_ID,NAME&${none}`);
    expect([csv.statusCode, csv.body]).toEqual([200, "CUST_ID,NAME\r\n"]);
    const json = await get(`/api/v4/core/CUST/export?source=anag-1&format=json&${none}`);
    expect([json.statusCode, json.body]).toEqual([200, "[]"]);
    const nd = await get(`/api/v4/core/CUST/export?source=anag-1&format=ndjson&${none}`);
    expect([nd.statusCode, nd.body]).toEqual([200, ""]);
  });

  it("CSV quotes every value with a CR, an LF, a quote or a comma: a strict reader reads the values back", async () => {
    const res = await get(`/api/v4/core/CUST/export?source=anag-1&fields=CUST_ID,NAME&${MIGRATED}`);
    expect(res.statusCode).toBe(200);
    const expected = Object.entries({ ...AWKWARD, ...FORMULAS }).map(([id, name]) => [
      String(1000 + Number(id)),
      name,
    ]);
    // Read as Python's csv or a spreadsheet reads it: a CR, an LF or a CRLF outside quotes ends
    // the record, and every record has as many cells as the header.
    const strict = parseCsv(res.body, { record_delimiter: ["\r\n", "\n", "\r"] }) as string[][];
    expect(strict).toEqual([["CUST_ID", "NAME"], ...expected]);
    // csv-parse's defaults agree.
    expect(parseCsv(res.body)).toEqual([["CUST_ID", "NAME"], ...expected]);
    // The lines themselves: quoted where RFC 4180 asks, not elsewhere.
    expect(res.body).toContain('1001,"two\nlines"\r\n');
    expect(res.body).toContain('1002,"cr\ronly"\r\n');
    expect(res.body).toContain('1003,"crlf\r\nend"\r\n');
    expect(res.body).toContain('1004,"a ""quoted"" word"\r\n');
    expect(res.body).toContain('1005,"comma, inside"\r\n');
    expect(res.body).toContain('1006,"\n"\r\n');
    expect(res.body).toContain("1007,plain\r\n");
    // The import reads the file back: the same values, exported again byte for byte.
    const imported = await t.app.inject({
      method: "POST",
      url: "/api/v4/core/CUST/import?source=anag-1&mode=upsert",
      headers: { ...bearer(anna), "content-type": "text/csv" },
      payload: res.body,
    });
    expect(imported.statusCode, imported.body).toBe(200);
    expect(imported.json().data).toMatchObject({ received: expected.length, failed: 0 });
    const again = await get(`/api/v4/core/CUST/export?source=anag-1&fields=CUST_ID,NAME&${MIGRATED}`);
    expect(again.body).toBe(res.body);
  });

  it("values that look like formulas are written as they are (an export is data, not a spreadsheet)", async () => {
    const res = await get(`/api/v4/core/CUST/export?source=anag-1&fields=CUST_ID,NAME&${MIGRATED}`);
    expect(res.body).toContain('1008,"=HYPERLINK(""http://example.test"",""x"")"\r\n');
    expect(res.body).toContain("1009,+1+1\r\n1010,-2+3\r\n1011,@SUM(A1)\r\n1012,\tTAB\r\n");
  });

  describe("fields naming a field a list may not show", () => {
    it("is refused naming it (EMAIL, NOTES: the detail shows them; RISK_SCORE: searchable only)", async () => {
      for (const [fields, field] of [
        ["EMAIL", "EMAIL"],
        ["CUST_ID,NOTES", "NOTES"],
        ["CUST_ID,RISK_SCORE,NAME", "RISK_SCORE"],
        ["INTERNAL", "INTERNAL"],
      ]) {
        for (const format of ["csv", "json", "ndjson"]) {
          const res = await get(`/api/v4/core/CUST/export?source=anag-1&format=${format}&fields=${fields}`);
          expect(res.statusCode, `${fields} ${format}`).toBe(400);
          expect(res.json(), fields).toMatchObject({ code: "FIELD_NOT_READABLE", field });
          expect(res.json().message).toBe(
            `${field} of CUST may not be read in lists (a record's detail may show it), and an export's columns are the fields a list shows: leave ${field} out of fields.`,
          );
        }
        // $fields, $select too.
        const select = await get(`/api/v4/core/CUST/export?source=anag-1&$select=${fields}`);
        expect(select.json()).toMatchObject({ code: "FIELD_NOT_READABLE", field });
      }
      // The detail does show EMAIL (the refusal is about lists, not about the caller's rights).
      const detail = await get("/api/v4/core/CUST/1?source=anag-1");
      expect(Object.keys(detail.json().data)).toContain("EMAIL");
    });

    it("an unknown field is still INVALID_FIELD, and the columns without fields are the L ones", async () => {
      const unknown = await get("/api/v4/core/CUST/export?source=anag-1&fields=CUST_ID,NOPE");
      expect(unknown.json()).toMatchObject({ code: "INVALID_FIELD", field: "NOPE" });
      const all = await get(`/api/v4/core/CUST/export?source=anag-1&format=json&${MIGRATED}`);
      const listed = await get(`/api/v4/core/CUST?source=anag-1&${MIGRATED}`);
      expect(Object.keys(all.json()[0])).toEqual(Object.keys(listed.json().data[0]));
      expect(Object.keys(all.json()[0])).not.toContain("EMAIL");
      const named = await get(`/api/v4/core/CUST/export?source=anag-1&fields=NAME,CUST_ID&${MIGRATED}`);
      expect(named.body.split("\r\n")[0]).toBe("CUST_ID,NAME");
    });
  });
});
