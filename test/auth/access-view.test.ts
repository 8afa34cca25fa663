// The access view (src/auth/access-view.ts): what one set of grant inputs may do under one metadata
// version, computed once and kept on the metadata model. Pure: the sample fixture's metadata.
import { describe, expect, it } from "vitest";
import { accessView, computeAccessView, computeFieldRules } from "../../src/auth/access-view.ts";
import { authorizeRead, authorizeWrite } from "../../src/auth/authorize.ts";
import { grantInputsOf, grantKey } from "../../src/auth/grants.ts";
import { createViewCache } from "../../src/auth/view-cache.ts";
import { ApiError } from "../../src/errors.ts";
import { fixtureMetadata, fixtureSchema } from "../../src/fixtures/schema.ts";
import { buildModel } from "../../src/metadata/build.ts";
import type { WriteContext } from "../../src/resolvers/write/context.ts";
import { checkCreateBody, checkUpdateBody, putClearedFields } from "../../src/resolvers/write/field-rules.ts";
import { presentRecord } from "../../src/resolvers/write/present.ts";
import type { Grant, MetadataModel, Operation, RequestContext } from "../../src/types.ts";
import { handContext, sampleFixture, sampleModel } from "../read/support.ts";

const model = sampleModel();

function grant(m: MetadataModel, code: string, operations: Operation[], level: number): Grant {
  const node = m.menuByCode.get(code)!;
  return { COD_MENU: code, NLEFT: node.nleft, NRIGHT: node.nright, OPERATIONS: operations, LEVEL: level };
}

/** marco of the sample users: peso 2, anag (read, write, 3), sales (read, write, 2), catalog (read, 1). */
function marco(source: string | null, centerDett: string | null = null, m = model): RequestContext {
  return handContext({
    source,
    centerDett,
    principal: {
      peso: 2,
      grants: [
        grant(m, "anag", ["read", "write"], 3),
        grant(m, "sales", ["read", "write"], 2),
        grant(m, "catalog", ["read"], 1),
      ],
    },
  });
}

/** lucia: peso 3, read on anag-1 and sales-1 only. */
function lucia(source: string | null, centerDett: string | null = null): RequestContext {
  return handContext({
    source,
    centerDett,
    principal: {
      peso: 3,
      grants: [grant(model, "anag-1", ["read"], 1), grant(model, "sales-1", ["read"], 1)],
    },
  });
}

const codes = (fields: readonly { code: string }[]) => fields.map((f) => f.code);

function refusal(fn: () => unknown): ApiError {
  try {
    fn();
  } catch (err) {
    if (err instanceof ApiError) return err;
    throw err;
  }
  throw new Error("expected a refusal");
}

/** What the write field rules read: the caller, the metadata, untrusted (no transaction used). */
function writeContext(ctx: RequestContext, m = model): WriteContext {
  return { ctx, model: m, trusted: false } as unknown as WriteContext;
}

describe("the access view for given grants", () => {
  it("decides dimensions through the source, with the source's level", () => {
    const view = accessView(marco("anag-1"), model);
    expect(view.sourceLevel).toBe(3);
    expect(view.may("CUST", "read")).toBe(true);
    expect(view.may("CUST", "delete")).toBe(true);
    expect(view.may("CUST", "force_delete")).toBe(false);
    // anag-1 serves CUST only.
    expect(view.may("ORD", "read")).toBe(false);
    const denied = view.decide("ORD", "read");
    expect("refusal" in denied && denied.refusal().toBody()).toMatchObject({
      status: 403,
      code: "INSUFFICIENT_PERMISSIONS",
      details: { reason: "source_serves_other_dimension", served_dimension: "CUST" },
    });
    expect(view.require(null, "read").map((g) => g.COD_MENU)).toEqual(["anag"]);
    expect(refusal(() => accessView(marco(null), model).require("CUST", "read")).toBody()).toMatchObject({
      status: 400,
      code: "MISSING_PARAMETER",
    });
  });

  it("answers 'may the caller read dimension X' once: through the source, else a menu node serving X", () => {
    const view = accessView(marco("anag-1"), model);
    expect(view.sourceFor("CUST", "read")).toBe("anag-1");
    expect(view.nodeFor("ORD", "read")).toBe("sales-1");
    expect(view.sourceFor("ORD", "read")).toBe("sales-1");
    const narrow = accessView(lucia("anag-1"), model);
    expect(narrow.sourceFor("ORD", "read")).toBe("sales-1");
    expect(narrow.sourceFor("ADDR", "read")).toBeNull();
    expect(narrow.nodeFor("CITY", "read")).toBeNull();
    // The planner's $expand, the read resolvers and OpenAPI ask the same view.
    expect(authorizeRead(lucia("anag-1"), model, "CUST").view).toBe(narrow);
  });

  it("holds each dimension's fields as the caller sees them (peso, COD_ON_OFF, center_dett)", () => {
    const cust = model.dimensions.get("CUST")!;
    const anna = accessView(handContext(), model).fields(cust);
    expect(codes(anna.withFlag("L"))).not.toContain("EMAIL");
    expect(codes(anna.withFlag("D"))).toContain("EMAIL");
    expect(codes(anna.withFlag("R"))).toContain("RISK_SCORE");
    expect(codes(anna.withFlag("N"))).not.toContain("CUST_ID");
    expect(anna.visibleField("CREDIT_LIMIT")?.code).toBe("CREDIT_LIMIT");
    const hidden = accessView(lucia("anag-1"), model).fields(cust);
    expect(hidden.visibleField("CREDIT_LIMIT")).toBeUndefined();
    expect(hidden.visibleField("NAME")?.code).toBe("NAME");
    expect(hidden.visibleField("__proto__")).toBeUndefined();
    expect(codes(hidden.visible)).not.toContain("CREDIT_LIMIT");
    const salesRep = cust.fieldsByCode.get("SALES_REP")!;
    expect(accessView(marco("anag-1"), model).fields(cust).allows(salesRep, "N")).toBe(false);
    expect(accessView(marco("anag-1", "nuovo"), model).fields(cust).allows(salesRep, "N")).toBe(true);
  });

  it("the proof the planner and the write pipeline require carries the view it was decided with", () => {
    const ctx = marco("anag-1");
    const read = authorizeRead(ctx, model, "CUST");
    expect(read.view).toBe(accessView(ctx, model));
    expect(read.rules).toBe(read.view.fields(model.dimensions.get("CUST")!));
    expect(read.code).toBe("CUST");
    expect(authorizeRead(ctx, model, "CUST")).toBe(read);
    expect(authorizeWrite(ctx, model, "CUST", "update").view).toBe(read.view);
    expect(refusal(() => authorizeWrite(ctx, model, "CUST", "force_delete")).status).toBe(403);
  });
});

describe("the view cache", () => {
  it("the same grant inputs get the same view (also from another session's copy of the grants)", () => {
    const view = accessView(marco("anag-1"), model);
    expect(accessView(marco("anag-1"), model)).toBe(view);
    const copy = marco("anag-1");
    copy.principal = {
      ...copy.principal,
      userId: "other",
      sessionId: "x",
      grants: structuredClone(copy.principal.grants),
    };
    expect(accessView(copy, model)).toBe(view);
    expect(view.key).toBe(grantKey(grantInputsOf(copy)));
  });

  it("a different source, peso, center_dett or grant is another view; field rules are shared across sources", () => {
    const view = accessView(marco("anag-1"), model);
    expect(accessView(marco("anag-2"), model)).not.toBe(view);
    expect(accessView(marco("anag-1", "nuovo"), model)).not.toBe(view);
    expect(accessView(lucia("anag-1"), model)).not.toBe(view);
    const cust = model.dimensions.get("CUST")!;
    expect(accessView(marco("anag-2"), model).fields(cust)).toBe(view.fields(cust));
    expect(accessView(marco("anag-1", "nuovo"), model).fields(cust)).not.toBe(view.fields(cust));
  });

  it("is bounded: the least recently used view goes first", () => {
    const cache = createViewCache({ maxViews: 2 });
    const make = (source: string) => () =>
      computeAccessView(model, grantInputsOf(marco(source)), computeFieldRules(2, null));
    const a = cache.view("a", make("anag-1"));
    cache.view("b", make("anag-2"));
    expect(cache.view("a", make("anag-1"))).toBe(a);
    cache.view("c", make("anag-3"));
    expect(cache.size()).toBe(2);
    expect(cache.view("a", make("anag-1"))).toBe(a);
    let made = false;
    cache.view("b", () => {
      made = true;
      return make("anag-2")();
    });
    expect(made).toBe(true);
  });

  it("a name that is no dimension is decided but not kept", () => {
    const view = accessView(marco("anag-1"), model);
    expect(view.may("NOPE", "read")).toBe(false);
    expect(view.decide("NOPE", "read")).not.toBe(view.decide("NOPE", "read"));
    expect(view.decide("CUST", "read")).toBe(view.decide("CUST", "read"));
  });

  it("a metadata change drops the views: the new model computes its own, from the new metadata", () => {
    const rows = fixtureMetadata(fixtureSchema.parse(sampleFixture()));
    const before = buildModel(rows, 1);
    const old = accessView(marco("anag-1", null, before), before);
    const name = (m: MetadataModel) => m.dimensions.get("CUST")!.fieldsByCode.get("NAME")!;
    expect(old.fields(before.dimensions.get("CUST")!).allows(name(before), "L")).toBe(true);
    // Version 2: NAME weighted for peso 1 only (COD_UTENTE 1).
    const changed = {
      ...rows,
      TB_COST: rows.TB_COST.map((c) =>
        c.COD_DIM === "CUST" && c.COD_VAR === "NAME" ? { ...c, COD_UTENTE: 1 } : c,
      ),
    };
    const after = buildModel(changed, 2);
    expect(after.accessViews).not.toBe(before.accessViews);
    const fresh = accessView(marco("anag-1", null, after), after);
    expect(fresh).not.toBe(old);
    expect(fresh.version).toBe(2);
    expect(fresh.fields(after.dimensions.get("CUST")!).visibleField("NAME")).toBeUndefined();
    // The old model's view is as it was (requests that started on it finish on it).
    expect(accessView(marco("anag-1", null, before), before)).toBe(old);
  });
});

describe("the write field rules and presenters read the view", () => {
  const cust = model.dimensions.get("CUST")!;

  it("create: a field hidden by peso or without N is refused; center_dett gives N to SALES_REP", () => {
    expect(() =>
      checkCreateBody(writeContext(marco("anag-1")), cust, { NAME: "x", CREDIT_LIMIT: 1 }),
    ).not.toThrow();
    expect(
      refusal(() => checkCreateBody(writeContext(lucia("anag-1")), cust, { CREDIT_LIMIT: 1 })).toBody(),
    ).toMatchObject({ code: "FIELD_NOT_ALLOWED_ON_CREATE", field: "CREDIT_LIMIT" });
    expect(refusal(() => checkCreateBody(writeContext(marco("anag-1")), cust, { SALES_REP: "r" })).code).toBe(
      "FIELD_NOT_ALLOWED_ON_CREATE",
    );
    expect(() =>
      checkCreateBody(writeContext(marco("anag-1", "nuovo")), cust, { SALES_REP: "r" }),
    ).not.toThrow();
    expect(refusal(() => checkCreateBody(writeContext(marco("anag-1")), cust, { NOPE: 1 })).code).toBe(
      "INVALID_FIELD",
    );
  });

  it("the rules come from the caller's view in the model's cache (seeded with another caller's here)", () => {
    const m = sampleModel();
    const ctx = marco("anag-1", null, m);
    // The view kept under marco's key is lucia's (peso 3): the rules follow the view, not the context.
    m.accessViews.view(grantKey(grantInputsOf(ctx)), () =>
      computeAccessView(m, grantInputsOf(ctx), computeFieldRules(3, null)),
    );
    const mcust = m.dimensions.get("CUST")!;
    expect(refusal(() => checkCreateBody(writeContext(ctx, m), mcust, { CREDIT_LIMIT: 1 })).code).toBe(
      "FIELD_NOT_ALLOWED_ON_CREATE",
    );
    expect(refusal(() => checkUpdateBody(writeContext(ctx, m), mcust, { CREDIT_LIMIT: 1 }, 1)).code).toBe(
      "FIELD_NOT_MODIFIABLE",
    );
    expect(codes(putClearedFields(writeContext(ctx, m), mcust, {}))).not.toContain("CREDIT_LIMIT");
    expect(presentRecord(ctx, m, "CUST", { CUST_ID: 1, NAME: "n", CREDIT_LIMIT: 5 })).toEqual({
      CUST_ID: 1,
      NAME: "n",
    });
    // The same caller under an unseeded model sees CREDIT_LIMIT.
    expect(presentRecord(marco("anag-1"), model, "CUST", { CUST_ID: 1, NAME: "n", CREDIT_LIMIT: 5 })).toEqual(
      {
        CUST_ID: 1,
        NAME: "n",
        CREDIT_LIMIT: 5,
      },
    );
  });
});
