// What README's demo users table says holds on the demo data: every user it lists logs in with its
// password and is in the start-up banner of a first load; sara ("read items and orders", peso 3,
// center SHOP) reads items and her shop's purchase order (before, no order was in SHOP: she saw
// none, and no PO event). The warehouse clerks' scope is row-scope.test.ts's "row scope in the demo
// data".
import { readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { demoLoginsBanner, loadDemoDataIfEmpty } from "../../src/demo/load-demo.ts";
import type { Services } from "../../src/services.ts";
import { loginAs } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, createTestServices, type TestApp } from "../helpers/env.ts";
import { graphqlClient } from "../graphql/helpers.ts";
import { client, NO_RATE_LIMITS } from "../write/http.ts";

const README = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../README.md");

/** README's demo users table: user, password, tenant, and the peso column's text. */
function readmeDemoUsers(): Array<{ user: string; password: string; tenant: string; peso: string }> {
  const lines = readFileSync(README, "utf8").split("\n");
  const header = lines.findIndex((l) => /^\| user \| password \| tenant \| peso \|/.test(l));
  expect(header).toBeGreaterThan(-1);
  const rows: Array<{ user: string; password: string; tenant: string; peso: string }> = [];
  for (const line of lines.slice(header + 2)) {
    if (!line.startsWith("|")) break;
    const [user, password, tenant, peso] = line
      .split("|")
      .slice(1, 5)
      .map((c) => c.trim());
    rows.push({ user: user!, password: password!, tenant: tenant!, peso: peso! });
  }
  return rows;
}

describe("README's demo users", () => {
  const users = readmeDemoUsers();

  it("README lists the demo users, ada and sara among them", () => {
    expect(users.map((u) => u.user)).toEqual(expect.arrayContaining(["ada", "olga", "sara", "kai"]));
  });

  describe("the start-up banner of a first load", () => {
    let services: Services;
    beforeAll(async () => {
      services = await createTestServices(BACKENDS[0]!);
    }, 120_000);
    afterAll(async () => {
      await services?.close();
    });

    it("lists every user of README's table with its password, tenant and peso", async () => {
      const logins = await loadDemoDataIfEmpty(services);
      expect(logins).not.toBeNull();
      const banner = demoLoginsBanner(logins!);
      expect(banner.split("\n")[1]).toBe(
        "Demo data loaded. Log in with POST /auth/login {username, password}:",
      );
      for (const u of users) {
        const line = banner.split("\n").find((l) => l.trim().startsWith(`${u.user} `));
        expect(line, u.user).toBeDefined();
        expect(line!.trim().split(/\s+/).slice(0, 5)).toEqual([
          u.user,
          u.password,
          "tenant",
          `${u.tenant},`,
          "peso",
        ]);
        expect(line!.trim().endsWith(`peso ${u.peso.split(" ")[0]}`), u.user).toBe(true);
      }
    });
  });

  describe("on the demo data", () => {
    let t: TestApp;
    beforeAll(async () => {
      t = await createTestApp(BACKENDS[0]!, { fixture: "demo", env: NO_RATE_LIMITS });
    }, 120_000);
    afterAll(async () => {
      await t?.close();
    });

    it("every user of the table logs in with the password it gives", async () => {
      for (const u of users) await expect(loginAs(t.app, u.user, u.password), u.user).resolves.toBeTruthy();
    });

    it("sara reads items and orders: her shop's purchase order, over REST and GraphQL", async () => {
      const sara = users.find((u) => u.user === "sara")!;
      expect(sara.peso).toContain("read items and orders");
      const token = await loginAs(t.app, sara.user, sara.password);
      const rest = client(t.app, token);
      const orders = await rest.get("/api/v4/core/PO?source=purchasing-1&$fields=PO_ID,CENTRO_DETT,SUPP_ID");
      expect(orders.status).toBe(200);
      expect(orders.body.data).toEqual([{ PO_ID: expect.any(Number), CENTRO_DETT: "SHOP", SUPP_ID: 3 }]);
      const items = await rest.get("/api/v4/core/ITEM?source=master-2&$fields=ITEM_ID");
      expect(items.status).toBe(200);
      expect(items.body.data.length).toBeGreaterThan(0);
      const gql = await graphqlClient(
        t.app,
        token,
      )(`{ PO(source: "purchasing-1") { meta { total } data { PO_ID PO_DATE } } }`);
      expect(gql.body.errors).toBeUndefined();
      expect(gql.body.data.PO).toEqual({
        meta: { total: 1 },
        data: [{ PO_ID: orders.body.data[0].PO_ID, PO_DATE: "20261118" }],
      });
    });
  });
});
