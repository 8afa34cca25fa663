// Round trips of a create (issue 11): a record with a template ({seq}) and a foreign key, through
// REST with a warm session, counted statement by statement on both databases.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, type TestApp } from "../helpers/env.ts";

describe.each(BACKENDS)("statements per create (%s)", (backend) => {
  const statements: string[] = [];
  let t: TestApp;
  let token: string;
  beforeAll(async () => {
    t = await createTestApp(backend, {
      fixture: "sample",
      env: UNLIMITED_ENV,
      onStatement: (text) => statements.push(text),
    });
    token = await loginAs(t.app, "anna", "anna-secret-1");
    // A first request warms the session cache.
    expect((await t.app.inject({ method: "GET", url: "/auth/me", headers: bearer(token) })).statusCode).toBe(200);
  });
  afterAll(async () => t?.close());

  const create = (data: Record<string, unknown>) =>
    t.app.inject({
      method: "POST",
      url: "/api/v4/core/CUST?source=anag-1",
      headers: bearer(token),
      payload: { data },
    });

  it("a create with a template and a foreign key", async () => {
    statements.length = 0;
    const res = await create({ NAME: "Round trips", CITY_ID: "MI" });
    expect(res.statusCode).toBe(201);
    expect(res.json().data).toMatchObject({ CODE: expect.stringMatching(/^C-\d{5}$/), CITY_ID: "MI" });
    console.log(statements.map((s) => s.replace(/\s+/g, " ").slice(0, 160)).join("\n"));
    expect(statements.length).toBeLessThanOrEqual(3);
  });
});
