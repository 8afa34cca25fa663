// Foreign-key lookups, GET /api/v4/core/vars (spec 4.4, decisions.md §12, issue 12).
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { expectInvalidParameter } from "../helpers/error-body.ts";
import { type Client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe.each(BACKENDS)("vars lookups (%s)", (backend) => {
  let t: TestApp;
  let anna: Client;
  let lucia: Client;
  let greta: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    [anna, lucia, greta] = await Promise.all([
      clientFor(t.app, "anna"),
      clientFor(t.app, "lucia"),
      clientFor(t.app, "greta"),
    ]);
  });
  afterAll(async () => {
    await t?.close();
  });

  const vars = (c: Client, query: string) => c.get(`/api/v4/core/vars?${query}`);

  it("VARS returns the whole list: key and display field, ordered by the display field, own tenant only", async () => {
    const res = await vars(anna, "source=anag-2&field=CITY_ID");
    expect(res.status).toBe(200);
    expect(res.body).toEqual([
      { CITY_ID: "MI", NAME: "Milano" },
      { CITY_ID: "MUC", NAME: "Muenchen" },
      { CITY_ID: "RM", NAME: "Roma" },
      { CITY_ID: "TO", NAME: "Torino" },
    ]);
  });

  it("AC needs a $filter (else []), or getACList=1", async () => {
    expect((await vars(anna, "source=anag-1&field=CITY_ID")).body).toEqual([]);
    const filtered = await vars(
      anna,
      `source=anag-1&field=CITY_ID&$filter=${encodeURIComponent("startwith(NAME,'M')")}`,
    );
    expect(filtered.body).toEqual([
      { CITY_ID: "MI", NAME: "Milano" },
      { CITY_ID: "MUC", NAME: "Muenchen" },
    ]);
    const either = await vars(
      anna,
      `source=anag-1&field=CITY_ID&$filter=${encodeURIComponent("equals(CITY_ID,'RM') or endwith(NAME,'rino')")}`,
    );
    expect(either.body.map((c: { CITY_ID: string }) => c.CITY_ID)).toEqual(["RM", "TO"]);
    const full = await vars(anna, "source=anag-1&field=CITY_ID&getACList=1");
    expect(full.body).toHaveLength(4);
  });

  it("getACList is 1/true (the whole list) or 0/false; any other value is 400 INVALID_PARAMETER", async () => {
    for (const value of ["1", "true", "TRUE"]) {
      const res = await vars(anna, `source=anag-1&field=CITY_ID&getACList=${value}`);
      expect(res.status, value).toBe(200);
      expect(res.body, value).toHaveLength(4);
    }
    for (const value of ["0", "false"]) {
      const res = await vars(anna, `source=anag-1&field=CITY_ID&getACList=${value}`);
      expect(res.status, value).toBe(200);
      expect(res.body, value).toEqual([]);
    }
    // Read as false, these answered [] ("no values"): a caller who sent them asked for the list.
    for (const value of ["yes", "2", "", "on"]) {
      const res = await vars(anna, `source=anag-1&field=CITY_ID&getACList=${value}`);
      expectInvalidParameter(
        res,
        {
          field: "getACList",
          message: `getACList is 1 (or true) for the whole list, or 0 (or false); got '${value}'.`,
        },
        value,
      );
    }
  });

  it("a lookup needs the read grant on the source only, not on the destination's node", async () => {
    // lucia reads anag-1 (customers) but holds no grant on anag-3 (cities).
    expect((await lucia.get("/api/v4/core/CITY?source=anag-3")).status).toBe(403);
    const res = await vars(lucia, "source=anag-1&field=CITY_ID&getACList=1");
    expect(res.status).toBe(200);
    expect(res.body).toHaveLength(4);
    expect((await vars(lucia, "source=anag-2&field=CITY_ID")).status).toBe(403);
  });

  it("wrong field kind, unknown field, missing parameters and filters on other fields are 400", async () => {
    expect((await vars(anna, "source=anag-1&field=NAME")).body).toMatchObject({
      code: "INVALID_FIELD_TYPE",
      status: 400,
      field: "NAME",
    });
    expect((await vars(anna, "source=anag-1&field=NOPE")).body).toMatchObject({
      code: "INVALID_FIELD",
      status: 400,
    });
    expect((await vars(anna, "source=anag-1")).body).toMatchObject({
      code: "MISSING_PARAMETER",
      field: "field",
    });
    expect((await vars(anna, "field=CITY_ID")).body).toMatchObject({
      code: "MISSING_PARAMETER",
      field: "source",
    });
    expect((await vars(anna, "source=anag&field=CITY_ID")).body).toMatchObject({
      code: "INVALID_PARAMETER",
      field: "source",
    });
    const other = await vars(
      anna,
      `source=anag-1&field=CITY_ID&$filter=${encodeURIComponent("COUNTRY eq 'IT'")}`,
    );
    expect(other.body).toMatchObject({ code: "INVALID_FILTER", status: 400 });
    // A list's parameters would be left unread (the whole list answered): refused, naming $filter.
    for (const [name, value] of [
      ["filter[NAME]", "Milano"],
      ["sort", "NAME"],
      ["cond_trec", "C"],
    ]) {
      const res = await vars(
        anna,
        `source=anag-1&field=CITY_ID&getACList=1&${encodeURIComponent(name!)}=${value}`,
      );
      expectInvalidParameter(res, {
        field: name!,
        message: `${name} is not taken by a lookup, which takes field, $filter (an expression on the key and display fields, e.g. $filter=NAME eq 'Rossi'), getACList, $num_rows and $offset.`,
      });
    }
  });

  it("another tenant's rows and cancelled rows are left out", async () => {
    const created = await anna.post("/api/v4/core/CITY?source=anag-3", {
      data: { CITY_ID: "BO", NAME: "Bologna", COUNTRY: "IT" },
    });
    expect(created.status).toBe(201);
    expect((await anna.delete("/api/v4/core/CITY/TO?source=anag-3")).status).toBe(200);
    const own = await vars(anna, "source=anag-2&field=CITY_ID");
    expect(own.body.map((c: { CITY_ID: string }) => c.CITY_ID)).toEqual(["BO", "MI", "MUC", "RM"]);
    const theirs = await vars(greta, "source=anag-2&field=CITY_ID");
    expect(theirs.body.map((c: { CITY_ID: string }) => c.CITY_ID)).toEqual(["MI", "MUC", "RM", "TO"]);
  });
});
