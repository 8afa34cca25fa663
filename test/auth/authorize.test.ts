// Authorization (spec 5.8, decisions.md §6): every layer as functions over the sample fixture's
// metadata, then the same cases over HTTP through the read and write routes, and tenant isolation.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  authorize,
  fieldAllows,
  fieldKnown,
  grantCovers,
  pesoAllows,
  sourceLevel,
  sourceServes,
  visibleFields,
} from "../../src/auth/authorize.ts";
import { ApiError } from "../../src/errors.ts";
import { readFixtureFile } from "../../src/fixtures/import.ts";
import { fixtureMetadata, fixtureSchema } from "../../src/fixtures/schema.ts";
import { buildModel } from "../../src/metadata/build.ts";
import type { Access, Grant, MetadataModel, Operation, RequestContext } from "../../src/types.ts";
import { bearer, loginAs, UNLIMITED_ENV } from "../helpers/auth.ts";
import { BACKENDS, createTestApp, SAMPLE_FIXTURE, type TestApp } from "../helpers/env.ts";

type GrantSpec = [code: string, operations: Operation[], level: number];

const USERS: Record<string, { peso: number; grants: GrantSpec[] }> = {
  anna: {
    peso: 1,
    grants: [
      ["erp", ["read", "write", "force_delete", "metadata"], 4],
      ["price-1", ["read", "write"], 4],
    ],
  },
  greta: { peso: 1, grants: [["erp", ["read", "write", "force_delete"], 4]] },
  marco: {
    peso: 2,
    grants: [
      ["anag", ["read", "write"], 3],
      ["sales", ["read", "write"], 2],
      ["catalog", ["read"], 1],
    ],
  },
  lucia: {
    peso: 3,
    grants: [
      ["anag-1", ["read"], 1],
      ["sales-1", ["read"], 1],
    ],
  },
};

let model: MetadataModel;

beforeAll(async () => {
  model = buildModel(fixtureMetadata(fixtureSchema.parse(await readFixtureFile(SAMPLE_FIXTURE))), 1);
});

function grant([code, operations, level]: GrantSpec): Grant {
  const node = model.menuByCode.get(code)!;
  return { COD_MENU: code, NLEFT: node.nleft, NRIGHT: node.nright, OPERATIONS: operations, LEVEL: level };
}

function ctxFor(
  who: { peso: number; grants: GrantSpec[] },
  source: string | null,
  centerDett: string | null = null,
): RequestContext {
  return {
    principal: {
      userId: "u",
      tenantId: "acme",
      sessionId: "s",
      peso: who.peso,
      centroDett: null,
      ambiente: null,
      lingua: null,
      grants: who.grants.map(grant),
    },
    source,
    centerDett,
    requestId: "r",
    now: () => new Date(),
  };
}

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

function expectDenied(user: string, source: string, dim: string | null, access: Access, required: unknown) {
  const err = refusal(() => authorize(ctxFor(USERS[user]!, source), model, dim, access));
  expect(err.status).toBe(403);
  const body = err.toBody();
  expect(body).toMatchObject({ error: "PermissionDenied", code: "INSUFFICIENT_PERMISSIONS", status: 403 });
  expect(body.required_grant).toEqual(required);
  expect(body.user_grants).toEqual(USERS[user]!.grants.map(grant));
}

const allowed = (user: string, source: string, dim: string | null, access: Access) =>
  authorize(ctxFor(USERS[user]!, source), model, dim, access);

describe("authorize() layers", () => {
  it("a request without source is 400 MISSING_PARAMETER", () => {
    const err = refusal(() => authorize(ctxFor(USERS.anna!, null), model, "CUST", "read"));
    expect(err.toBody()).toMatchObject({ code: "MISSING_PARAMETER", status: 400, field: "source" });
  });

  it("a source that is no TB_MENU node is refused", () => {
    expectDenied("anna", "nowhere-9", "CUST", "read", 1);
  });

  it("no grant covering the source: 403 naming the source", () => {
    expectDenied("lucia", "catalog-1", "PROD", "read", 1);
  });

  it("a grant on a sibling node does not cover the source", () => {
    expectDenied("lucia", "anag-2", "ADDR", "read", 1);
    expectDenied("lucia", "anag", null, "read", 1);
  });

  it("a parent grant covers its children", () => {
    expect(allowed("marco", "anag-1", "CUST", "read").map((g) => g.COD_MENU)).toEqual(["anag"]);
    expect(allowed("marco", "anag-3", "CITY", "delete").map((g) => g.COD_MENU)).toEqual(["anag"]);
    expect(allowed("anna", "sales-2", "ORDL", "force_delete").map((g) => g.COD_MENU)).toEqual(["erp"]);
    expect(grantCovers(grant(["anag", [], 1]), model.menuByCode.get("anag-2")!)).toBe(true);
    expect(grantCovers(grant(["anag-1", [], 1]), model.menuByCode.get("anag")!)).toBe(false);
  });

  it("a source serving another dimension is refused with that dimension", () => {
    expectDenied("lucia", "anag-1", "ORD", "read", 1);
    expectDenied("anna", "sales-1", "CUST", "create", 2);
  });

  it("a grouping source serves the dimensions below it only", () => {
    expect(allowed("marco", "anag", "ADDR", "read")).toHaveLength(1);
    expectDenied("anna", "anag", "ORD", "read", 1);
    expect(sourceServes(model, model.menuByCode.get("erp")!, "PRICE")).toBe(false);
    expect(sourceServes(model, model.menuByCode.get("erp")!, "ORDL")).toBe(true);
    expect(sourceServes(model, model.menuByCode.get("erp")!, "NOT_SERVED_ANYWHERE")).toBe(true);
  });

  it("the operation must be granted", () => {
    expectDenied("lucia", "anag-1", "CUST", "create", "write");
    expectDenied("marco", "catalog-1", "PROD", "update", "write");
    expect(allowed("marco", "catalog-1", "PROD", "read")).toHaveLength(1);
  });

  it("the level must reach the one the access needs (read 1, write 2, delete 3, metadata 4)", () => {
    expect(allowed("marco", "sales-1", "ORD", "create")).toHaveLength(1);
    expect(allowed("marco", "sales-1", "ORD", "update")).toHaveLength(1);
    expectDenied("marco", "sales-1", "ORD", "delete", 3);
    expect(allowed("marco", "anag-1", "CUST", "delete")).toHaveLength(1);
    // Metadata needs the metadata operation (decisions §6): level 4 without it is not enough.
    expectDenied("marco", "anag", null, "metadata", "metadata");
    expectDenied("greta", "erp", null, "metadata", "metadata");
    expect(allowed("anna", "erp", null, "metadata")).toHaveLength(1);
    const levelZero = { peso: 3, grants: [["anag-1", ["read"], 0] as GrantSpec] };
    const err = refusal(() => authorize(ctxFor(levelZero, "anag-1"), model, "CUST", "read"));
    expect(err.toBody().required_grant).toBe(1);
  });

  it("force delete needs the force_delete grant", () => {
    expectDenied("marco", "anag-1", "CUST", "force_delete", "force_delete");
    expect(allowed("anna", "anag-1", "CUST", "force_delete")).toHaveLength(1);
  });

  it("force delete may come from a separate grant on the same subtree", () => {
    const split = {
      peso: 2,
      grants: [["anag", ["read", "write"], 3] as GrantSpec, ["anag-1", ["force_delete"], 1] as GrantSpec],
    };
    expect(authorize(ctxFor(split, "anag-1"), model, "CUST", "force_delete")).toHaveLength(2);
    expect(() => authorize(ctxFor(split, "anag-2"), model, "ADDR", "force_delete")).toThrow(ApiError);
  });

  it("the most permissive covering grant decides", () => {
    const two = {
      peso: 2,
      grants: [["anag", ["read"], 1] as GrantSpec, ["anag-1", ["read", "write"], 3] as GrantSpec],
    };
    expect(authorize(ctxFor(two, "anag-1"), model, "CUST", "delete")).toHaveLength(2);
    expect(sourceLevel(ctxFor(two, "anag-1"), model)).toBe(3);
    expect(sourceLevel(ctxFor(two, "anag-2"), model)).toBe(1);
    expect(sourceLevel(ctxFor(two, "sales-1"), model)).toBe(0);
  });
});

describe("field visibility", () => {
  const field = (dim: string, code: string) => model.dimensions.get(dim)!.fieldsByCode.get(code)!;

  it("peso against COD_UTENTE: a higher peso sees less", () => {
    const principal = (peso: number) => ctxFor({ peso, grants: [] }, "anag-1").principal;
    expect(pesoAllows(principal(1), 2)).toBe(true);
    expect(pesoAllows(principal(2), 2)).toBe(true);
    expect(pesoAllows(principal(3), 2)).toBe(false);
    expect(pesoAllows(principal(3), null)).toBe(true);
    expect(pesoAllows(principal(3), 3)).toBe(true);
    const credit = field("CUST", "CREDIT_LIMIT");
    expect(fieldAllows(ctxFor(USERS.marco!, "anag-1"), credit, "L")).toBe(true);
    expect(fieldAllows(ctxFor(USERS.lucia!, "anag-1"), credit, "L")).toBe(false);
    expect(fieldKnown(ctxFor(USERS.lucia!, "anag-1"), credit)).toBe(false);
    expect(fieldKnown(ctxFor(USERS.lucia!, "anag-1"), field("CUST", "NAME"))).toBe(true);
  });

  it("COD_ON_OFF flags decide per operation; empty hides the field", () => {
    const ctx = ctxFor(USERS.anna!, "anag-1");
    const codes = (flag: "L" | "D" | "N" | "M" | "R") =>
      visibleFields(ctx, model.dimensions.get("CUST")!, flag).map((f) => f.code);
    expect(codes("L")).not.toContain("EMAIL");
    expect(codes("D")).toContain("EMAIL");
    expect(codes("R")).toContain("RISK_SCORE");
    expect(codes("L")).not.toContain("RISK_SCORE");
    expect(codes("N")).not.toContain("CUST_ID");
    expect(codes("M")).not.toContain("CODE");
    for (const flag of ["L", "D", "N", "M", "R"] as const) expect(codes(flag)).not.toContain("INTERNAL");
    expect(
      visibleFields(ctxFor(USERS.lucia!, "anag-1"), model.dimensions.get("CUST")!, "L").map((f) => f.code),
    ).not.toContain("CREDIT_LIMIT");
  });

  it("center_dett picks the TB_COST row of that context", () => {
    const salesRep = field("CUST", "SALES_REP");
    expect(fieldAllows(ctxFor(USERS.anna!, "anag-1"), salesRep, "N")).toBe(false);
    expect(fieldAllows(ctxFor(USERS.anna!, "anag-1", "nuovo"), salesRep, "N")).toBe(true);
    expect(fieldAllows(ctxFor(USERS.anna!, "anag-1", "modifica"), salesRep, "N")).toBe(false);
  });
});

describe.each(BACKENDS)("authorization over HTTP (%s)", (backend) => {
  let t: TestApp;
  const tokens: Record<string, string> = {};

  beforeAll(async () => {
    t = await createTestApp(backend, { fixture: "sample", env: UNLIMITED_ENV });
    tokens.anna = await loginAs(t.app, "anna", "anna-secret-1");
    tokens.marco = await loginAs(t.app, "marco", "marco-secret-2");
    tokens.lucia = await loginAs(t.app, "lucia", "lucia-secret-3");
    tokens.greta = await loginAs(t.app, "greta", "greta-secret-4");
  });
  afterAll(async () => t?.close());

  const get = (who: string, url: string) =>
    t.app.inject({ method: "GET", url, headers: bearer(tokens[who]!) });

  function expect403(res: { statusCode: number; json(): Record<string, unknown> }, required: unknown) {
    expect(res.statusCode).toBe(403);
    const body = res.json();
    expect(body).toMatchObject({ error: "PermissionDenied", code: "INSUFFICIENT_PERMISSIONS", status: 403 });
    expect(body.required_grant).toEqual(required);
    expect(Array.isArray(body.user_grants)).toBe(true);
  }

  it("a protected route without a token is 401", async () => {
    const res = await t.app.inject({ method: "GET", url: "/api/v4/core/CUST?source=anag-1" });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe("TOKEN_MISSING");
  });

  it("no source: 400 MISSING_PARAMETER", async () => {
    const res = await get("anna", "/api/v4/core/CUST");
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: "MISSING_PARAMETER", status: 400 });
  });

  it("no grant, sibling grant, other dimension: 403", async () => {
    expect403(await get("lucia", "/api/v4/core/PROD?source=catalog-1"), 1);
    expect403(await get("lucia", "/api/v4/core/ADDR?source=anag-2"), 1);
    expect403(await get("lucia", "/api/v4/core/ORD?source=anag-1"), 1);
  });

  it("a parent grant covering a child: 200", async () => {
    const res = await get("marco", "/api/v4/core/CUST?source=anag-1");
    expect(res.statusCode).toBe(200);
    expect(res.json().data.length).toBe(4);
  });

  it("the operation and the level are checked on writes", async () => {
    const create = await t.app.inject({
      method: "POST",
      url: "/api/v4/core/CUST?source=anag-1",
      headers: bearer(tokens.lucia!),
      payload: { data: { NAME: "Nope" } },
    });
    expect403(create, "write");
    const del = await t.app.inject({
      method: "DELETE",
      url: "/api/v4/core/ORD/1?source=sales-1",
      headers: bearer(tokens.marco!),
    });
    expect403(del, 3);
  });

  it("force delete without the force_delete grant: 403", async () => {
    const res = await t.app.inject({
      method: "DELETE",
      url: "/api/v4/core/CUST/1?source=anag-1&force=true",
      headers: bearer(tokens.marco!),
    });
    expect403(res, "force_delete");
  });

  it("source may come in a write body", async () => {
    const res = await t.app.inject({
      method: "POST",
      url: "/api/v4/core/CUST",
      headers: bearer(tokens.lucia!),
      payload: { source: "anag-1", data: { NAME: "Nope" } },
    });
    expect403(res, "write");
  });

  it("peso hides a field heavier than the user", async () => {
    const byMarco = (await get("marco", "/api/v4/core/CUST/1?source=anag-1")).json();
    const byLucia = (await get("lucia", "/api/v4/core/CUST/1?source=anag-1")).json();
    const record = (b: Record<string, unknown>) => (b.data ?? b) as Record<string, unknown>;
    expect(record(byMarco)).toHaveProperty("CREDIT_LIMIT");
    expect(record(byLucia)).not.toHaveProperty("CREDIT_LIMIT");
    expect(record(byLucia)).toHaveProperty("NAME");
  });

  it("a record of tenant B is invisible to tenant A (404), and the other way round", async () => {
    const globexList = (await get("greta", "/api/v4/core/CUST?source=anag-1")).json().data as Array<
      Record<string, unknown>
    >;
    expect(globexList.map((r) => r.NAME)).toEqual(["Huber GmbH"]);
    const huberId = globexList[0]!.CUST_ID;

    const byAnna = await get("anna", `/api/v4/core/CUST/${huberId}?source=anag-1`);
    expect(byAnna.statusCode).toBe(404);
    expect(byAnna.json()).toMatchObject({ status: 404, error: "NotFound" });
    const annaList = (await get("anna", "/api/v4/core/CUST?source=anag-1")).json().data as Array<
      Record<string, unknown>
    >;
    expect(annaList.map((r) => r.CUST_ID)).not.toContain(huberId);
    expect((await get("greta", `/api/v4/core/CUST/${huberId}?source=anag-1`)).statusCode).toBe(200);
    expect((await get("greta", `/api/v4/core/CUST/${annaList[0]!.CUST_ID}?source=anag-1`)).statusCode).toBe(
      404,
    );

    const patch = await t.app.inject({
      method: "PATCH",
      url: `/api/v4/core/CUST/${huberId}?source=anag-1`,
      headers: bearer(tokens.anna!),
      payload: { data: { NAME: "Taken over" } },
    });
    expect(patch.statusCode).toBe(404);
    const del = await t.app.inject({
      method: "DELETE",
      url: `/api/v4/core/CUST/${huberId}?source=anag-1&force=true`,
      headers: bearer(tokens.anna!),
    });
    expect(del.statusCode).toBe(404);
    const still = await t.services.db.query<{ NAME: string }>(
      `SELECT "NAME" FROM "TB_ANAG_CUST00" WHERE "CUST_ID" = $1`,
      [huberId],
    );
    expect(still.rows).toEqual([{ NAME: "Huber GmbH" }]);
  });
});
