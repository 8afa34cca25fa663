// Shared by the read tests: hand-built request contexts, the sample metadata as a model, and the
// environment that switches rate limits off (tests send many requests per second).
import { readFileSync } from "node:fs";
import { fixtureMetadata, fixtureSchema } from "../../src/fixtures/schema.ts";
import { type AuthorizedDimension, authorizeRead } from "../../src/auth/authorize.ts";
import { buildModel } from "../../src/metadata/build.ts";
import type { MetadataModel, MetadataRows, Principal, RequestContext } from "../../src/types.ts";
import { SAMPLE_FIXTURE } from "../helpers/env.ts";

/** Rate limits off (tests send many requests a second as one user). */
export { UNLIMITED_ENV as NO_RATE_LIMITS } from "../helpers/auth.ts";

export const ERP_GRANT = {
  COD_MENU: "erp",
  NLEFT: 1,
  NRIGHT: 22,
  OPERATIONS: ["read", "write", "force_delete"],
  LEVEL: 4,
} satisfies Principal["grants"][number];

/** A request context built by hand (resolver tests): anna-like unless overridden. */
export function handContext(
  overrides: Partial<Omit<RequestContext, "principal">> & { principal?: Partial<Principal> } = {},
): RequestContext {
  const { principal, ...rest } = overrides;
  return {
    principal: {
      userId: "anna",
      tenantId: "acme",
      sessionId: "t",
      peso: 1,
      centroDett: null,
      ambiente: null,
      lingua: null,
      grants: [ERP_GRANT],
      ...principal,
    },
    source: "anag-1",
    centerDett: null,
    requestId: "t",
    now: () => new Date("2026-11-21T10:00:00Z"),
    ...rest,
  };
}

export function sampleFixture(): Record<string, unknown> & MetadataRows {
  return JSON.parse(readFileSync(SAMPLE_FIXTURE, "utf8"));
}

/** The sample fixture's metadata as a model (no database): for pure planning and compiling tests. */
export function sampleModel(): MetadataModel {
  return buildModel(fixtureMetadata(fixtureSchema.parse(sampleFixture())), 1);
}

/**
 * A dimension of the sample model authorized for reading, as the read resolvers get it (the
 * planner requires the proof): through the menu node that serves it, as anna.
 */
export function authorizedDimension(model: MetadataModel, code: string): AuthorizedDimension<"read"> {
  const node = model.menu.find((m) => m.dim === code);
  const grants = [
    ERP_GRANT,
    { COD_MENU: "price-1", NLEFT: 23, NRIGHT: 24, OPERATIONS: ["read"], LEVEL: 1 },
  ] satisfies Principal["grants"];
  return authorizeRead(handContext({ source: node?.code ?? "erp", principal: { grants } }), model, code);
}
