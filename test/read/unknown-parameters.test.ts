// A read refuses a query parameter it does not know (400 INVALID_PARAMETER naming it). Before, a
// plain name was left unread: GET /CUST?CITY_ID=MI, meant as a filter, answered every customer.
// When the name is a field of the dimension the caller may know of, the message gives the
// filter's form. The cache-buster `_` (jQuery's `cache: false`) is taken and ignored everywhere.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";
import { type Client, client, clientFor, NO_RATE_LIMITS } from "../write/http.ts";

describe.each(BACKENDS)("unknown query parameters on REST reads (%s)", (backend) => {
  let t: TestApp;
  let annaToken: string;
  let anna: Client;
  let lucia: Client;

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: NO_RATE_LIMITS });
    annaToken = await loginAs(t.app, SAMPLE_USERS.anna.username, SAMPLE_USERS.anna.password);
    anna = client(t.app, annaToken);
    lucia = await clientFor(t.app, "lucia");
  });
  afterAll(async () => {
    await t?.close();
  });

  const filterHint = (field: string) =>
    `${field} is a field: to filter on it, write filter[${field}]=value (or $filter=${field} eq 'value').`;

  function expectRefused(res: { status: number; body: Record<string, unknown> }, name: string) {
    expect(res.status).toBe(400);
    expect(res.body).toMatchObject({
      code: "INVALID_PARAMETER",
      status: 400,
      field: name,
      message: expect.stringMatching(
        new RegExp(
          `^Unknown query parameter ${name.replace(/[[\]]/g, "\\$&")}: no parameter of this request has that name\\.`,
        ),
      ),
    });
  }

  it("a list refuses a field's name given as a plain parameter, and says how to filter on it", async () => {
    const res = await anna.get("/api/v4/core/CUST?source=anag-1&CITY_ID=MI");
    expectRefused(res, "CITY_ID");
    expect(res.body.message).toContain(filterHint("CITY_ID"));
    // The filter form is answered, and filters.
    const filtered = await anna.get("/api/v4/core/CUST?source=anag-1&filter[CITY_ID]=MI");
    expect(filtered.status).toBe(200);
    const all = await anna.get("/api/v4/core/CUST?source=anag-1");
    expect(filtered.body.meta.total).toBeLessThan(all.body.meta.total);
  });

  it("a name that is no field is refused without the hint; so is an unknown bracketed name", async () => {
    const res = await anna.get("/api/v4/core/CUST?source=anag-1&colour=red");
    expectRefused(res, "colour");
    expect(res.body.message).not.toContain("is a field");
    expectRefused(await anna.get("/api/v4/core/CUST?source=anag-1&where[NAME]=x"), "where[NAME]");
  });

  it("a field the caller's peso hides gets no hint: it does not exist for that caller", async () => {
    const hidden = await lucia.get("/api/v4/core/CUST?source=anag-1&CREDIT_LIMIT=5");
    expectRefused(hidden, "CREDIT_LIMIT");
    expect(hidden.body.message).not.toContain("is a field");
    const seen = await anna.get("/api/v4/core/CUST?source=anag-1&CREDIT_LIMIT=5");
    expect(seen.body.message).toContain(filterHint("CREDIT_LIMIT"));
  });

  it("nor does a field of a dimension the caller may not read through the source (the parameters are read first)", async () => {
    const other = await lucia.get("/api/v4/core/ORD?source=anag-1&ORD_ID=1");
    expectRefused(other, "ORD_ID");
    expect(other.body.message).not.toContain("is a field");
    const readable = await lucia.get("/api/v4/core/ORD?source=sales-1&ORD_ID=1");
    expect(readable.body.message).toContain(filterHint("ORD_ID"));
  });

  it("count and a named sort refuse it the same way, with the hint", async () => {
    const count = await anna.get("/api/v4/core/CUST/count?source=anag-1&CITY_ID=MI");
    expectRefused(count, "CITY_ID");
    expect(count.body.message).toContain(filterHint("CITY_ID"));
    const sorted = await anna.get("/api/v4/core/CUST/sort/by_name?source=anag-1&CITY_ID=MI");
    expectRefused(sorted, "CITY_ID");
    expect(sorted.body.message).toContain(filterHint("CITY_ID"));
  });

  it("an export, a single record and a lookup refuse an unknown name too", async () => {
    expectRefused(await anna.get("/api/v4/core/CUST/export?source=anag-1&format=csv&CITY_ID=MI"), "CITY_ID");
    const record = await anna.get("/api/v4/core/CUST/1?source=anag-1&CITY_ID=MI");
    expectRefused(record, "CITY_ID");
    // A record is named by its id: no filter applies there, so no filter is suggested.
    expect(record.body.message).not.toContain("filter[");
    expectRefused(await anna.get("/api/v4/core/vars?source=anag-1&field=CITY_ID&lang=it"), "lang");
  });

  it("the cache-buster _ is taken and ignored by every read", async () => {
    const buster = "_=1764400000000";
    const list = await anna.get(`/api/v4/core/CUST?source=anag-1&sort=CUST_ID&${buster}`);
    expect(list.status).toBe(200);
    expect(list.body.data).toEqual(
      (await anna.get("/api/v4/core/CUST?source=anag-1&sort=CUST_ID")).body.data,
    );
    expect((await anna.get(`/api/v4/core/CUST/count?source=anag-1&${buster}`)).status).toBe(200);
    expect((await anna.get(`/api/v4/core/CUST/sort/by_name?source=anag-1&${buster}`)).status).toBe(200);
    expect((await anna.get(`/api/v4/core/CUST/1?source=anag-1&${buster}`)).status).toBe(200);
    const exported = await t.app.inject({
      url: `/api/v4/core/CUST/export?source=anag-1&format=csv&${buster}`,
      headers: bearer(annaToken),
    });
    expect(exported.statusCode).toBe(200);
    expect(
      (await anna.get(`/api/v4/core/vars?source=anag-1&field=CITY_ID&getACList=1&${buster}`)).status,
    ).toBe(200);
  });
});
