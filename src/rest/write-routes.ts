// Write endpoints of spec 4.3 (routed to the write backend) and metadata writes: authenticate,
// read the body, call the write resolver, shape the response. No rule is decided here.
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from "fastify";
import { BadRequestError } from "../errors.ts";
import { type QueryParams, refuseReadParameters, refuseUnknownNames } from "../query/rest-params.ts";
import type { MetadataWriteOp } from "../resolvers/metadata/input.ts";
import { writeMetadata } from "../resolvers/metadata/write.ts";
import { METADATA_TABLES } from "../metadata/tables.ts";
import { batchCreate, batchDelete, batchUpdate } from "../resolvers/write/batch.ts";
import { runCommand } from "../resolvers/write/commands.ts";
import { refuseUnknownMembers } from "../resolvers/write/body-members.ts";
import { runCoreBatch } from "../resolvers/write/core-batch.ts";
import { createOne, deleteOne, updateOne } from "../resolvers/write/operations.ts";
import { presentCascaded } from "../resolvers/write/present.ts";
import { restoreRevision } from "../resolvers/write/restore.ts";
import type { BatchResult, MetadataWriteResult, RequestContext, WriteResult } from "../types.ts";
import { type RouteDeps, servicesOf } from "./deps.ts";
import { agreedContextOf, SCOPE_PARAMETERS } from "./scope.ts";

const CORE = "/api/v4/core";

type Body = Record<string, unknown>;
type DimParams = { Params: { dim: string } };
type RecordParams = { Params: { dim: string; id: string }; Querystring: { force?: string } };

/**
 * The body as a JSON object whose members are all among `takes` (the route's own and the scope,
 * spec 4.1): another one would be left unread (400 INVALID_REQUEST naming it, refuseUnknownMembers).
 */
function bodyObject(body: unknown, takes: readonly string[], where: string): Body {
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new BadRequestError("INVALID_REQUEST", "The request body must be a JSON object.");
  }
  refuseUnknownMembers(body, takes, where);
  return body as Body;
}

/** What a body carrying `members` takes: those, and the scope (spec 4.1, src/rest/scope.ts). */
const bodyTaking = (...members: string[]): readonly string[] => [...members, ...SCOPE_PARAMETERS];

const DATA_BODY = bodyTaking("data");
const BATCH_DELETE_BODY = bodyTaking("ids", "force");
const COMMAND_BODY = bodyTaking("id", "data");
/** A metadata write's body; `fields` only with a new dimension (src/resolvers/metadata/input.ts). */
const METADATA_BODY = bodyTaking("data", "fields");

/** The `data` object of a write body ({data: {field: value}}). */
function dataObject(body: unknown, where: string): Body {
  const data = bodyObject(body, DATA_BODY, where).data;
  if (data === null || typeof data !== "object" || Array.isArray(data)) {
    throw new BadRequestError("INVALID_REQUEST", "The body must be {data: {field: value, …}}.", {
      field: "data",
    });
  }
  return data as Body;
}

function arrayMember(body: Body, member: string): unknown[] {
  const list = body[member];
  if (!Array.isArray(list)) {
    throw new BadRequestError("INVALID_REQUEST", `The body must carry ${member}: [ … ].`, { field: member });
  }
  return list;
}

/**
 * A flag such as `force`: true, false, 1 or 0. An empty value (`?force=`, a bare `?force`) is
 * refused, not read as either: a force delete cannot be undone, so only an explicit true asks it.
 */
function parseFlag(value: unknown, name: string): boolean {
  if (value === undefined || value === null || value === false || value === "false" || value === "0")
    return false;
  if (value === true || value === "true" || value === "1") return true;
  throw new BadRequestError("INVALID_PARAMETER", `${name} must be true or false.`, { field: name });
}

const TAKES_NO_READ_PARAMETER: ReadonlySet<string> = new Set();

/**
 * A write of one record (POST /{dim}, PUT, PATCH, DELETE /{dim}/{id}) reads no list or record
 * parameter: `$fields`, `$expand`, `filter[…]`, paging… would be left unread (a PATCH with
 * `filter[…]` still writes its record), so each is 400 INVALID_PARAMETER naming it, as on the
 * detail read (src/query/rest-params.ts, refuseReadParameters).
 */
function refuseReadParametersOnWrite(request: FastifyRequest, forceToo: boolean): void {
  refuseReadParameters(
    request.query as QueryParams,
    TAKES_NO_READ_PARAMETER,
    (name) =>
      `${name} is a read parameter; a write of one record names its record by the path, carries its values in the body and answers the record as written, so its query string takes only source and the context parameters center_dett, ambiente, modulo, microservice${forceToo ? ", and force" : ""}.`,
  );
}

/** What a body that carries nothing of its own (a DELETE's, a revision restore's) may name: the scope. */
const SCOPE_BODY = bodyTaking();

/**
 * A single DELETE reads `force` from the query string (spec 4.3), and from its body only the
 * scope: any other member would be left unread (`{"force": true}` answered by a soft delete, the
 * record still stored), so it is refused naming it, and a body's force is told where it goes. A
 * revision's restore reads its body the same way. No body at all is fine.
 */
function checkScopeOnlyBody(body: unknown, where: string): void {
  if (body === undefined || body === null) return;
  if (typeof body !== "object" || Array.isArray(body)) {
    throw new BadRequestError(
      "INVALID_REQUEST",
      `${where} takes no body but {source, center_dett}; a DELETE's force goes in the query string (?force=true).`,
    );
  }
  refuseUnknownMembers(body, SCOPE_BODY, where, (member) =>
    member === "force"
      ? " A DELETE's force goes in its query string (?force=true, spec 4.3), not in its body."
      : "",
  );
}

function withCascaded(body: Body, result: WriteResult): Body {
  if (result.cascaded.length) body.cascaded = presentCascaded(result);
  return body;
}

/** A batch's answer; a record's result carries `cascaded` as its single write's body would. */
function batchBody(result: BatchResult): Body {
  return {
    success: result.success,
    failed: result.failed,
    results: result.results.map((r) => {
      if (r.status === "failed") return { index: r.index, id: r.id, status: r.status, error: r.error };
      const item: Body = { index: r.index, id: r.id, status: r.status, event_id: r.result?.eventId };
      return r.result ? withCascaded(item, r.result) : item;
    }),
  };
}

function metadataBody(result: MetadataWriteResult, verb: string): Body {
  const body: Body = {
    data: result.row,
    message: result.warnings?.length
      ? `${result.code} ${result.key} ${verb}; see warnings.`
      : `${result.code} ${result.key} ${verb}.`,
    event_id: result.eventId,
    version: result.version,
  };
  // Work the committed change left undone (a cancelled index build): the change itself stands.
  if (result.warnings?.length) body.warnings = result.warnings;
  if (result.related.length) {
    body.related = result.related.map((r) => ({
      code: r.code,
      key: r.key,
      action: r.action,
      event_id: r.eventId,
    }));
  }
  return body;
}

export const writeRoutes: FastifyPluginAsync<RouteDeps> = async (app, { services }) => {
  // `source` (and `center_dett`) in the query string and in the body must agree (src/rest/scope.ts).
  const ctxOf = (request: FastifyRequest): RequestContext => agreedContextOf(request);

  // ---------------------------------------------------------------- multi-dimension batch
  app.post(`${CORE}/batch`, async (request, _reply) => {
    const ctx = ctxOf(request);
    const results = await runCoreBatch(servicesOf(services, request), ctx, request.body);
    return {
      success: results.length,
      results: results.map(({ index, ref, method, dim, result }) =>
        withCascaded(
          {
            index,
            ref,
            method,
            dimension: dim,
            status: method === "POST" ? 201 : 200,
            id: result.recordId,
            event_id: result.eventId,
            data: result.visible,
          },
          result,
        ),
      ),
    };
  });

  // ---------------------------------------------------------------- metadata writes (level 4)
  for (const table of Object.values(METADATA_TABLES)) {
    const base = `${CORE}/${table.code}`;
    const keyPath = `${base}/${table.key.map((k) => `:${k}`).join("/")}`;
    const run = async (request: FastifyRequest, _reply: FastifyReply, op: MetadataWriteOp) => {
      const ctx = ctxOf(request);
      let body: Body = {};
      if (op === "delete") checkScopeOnlyBody(request.body, `a DELETE body of ${table.code}`);
      else body = bodyObject(request.body, METADATA_BODY, `a ${request.method} body of ${table.code}`);
      return writeMetadata(services, ctx, {
        code: table.code,
        op,
        key: request.params as Record<string, string>,
        ...(op === "delete" ? {} : { data: body.data }),
        ...(body.fields !== undefined ? { fields: body.fields } : {}),
      });
    };
    app.post(base, async (request, reply) =>
      reply.status(201).send(metadataBody(await run(request, reply, "create"), "created")),
    );
    app.put(keyPath, async (request, reply) =>
      metadataBody(await run(request, reply, "replace"), "replaced"),
    );
    app.patch(keyPath, async (request, reply) => metadataBody(await run(request, reply, "patch"), "updated"));
    app.delete(keyPath, async (request, reply) =>
      metadataBody(await run(request, reply, "delete"), "deleted"),
    );
  }

  // ---------------------------------------------------------------- batches on one dimension
  app.post<DimParams>(`${CORE}/:dim/batch`, async (request, _reply) => {
    const ctx = ctxOf(request);
    return batchBody(
      await batchCreate(
        servicesOf(services, request),
        ctx,
        request.params.dim,
        arrayMember(bodyObject(request.body, DATA_BODY, "a batch create body"), "data"),
      ),
    );
  });
  app.patch<DimParams>(`${CORE}/:dim/batch`, async (request, _reply) => {
    const ctx = ctxOf(request);
    return batchBody(
      await batchUpdate(
        servicesOf(services, request),
        ctx,
        request.params.dim,
        arrayMember(bodyObject(request.body, DATA_BODY, "a batch update body"), "data"),
      ),
    );
  });
  app.post<DimParams>(`${CORE}/:dim/batch-delete`, async (request, _reply) => {
    // `force` is a member of the body here (spec 4.3, {ids, force}); the query string's is not read.
    if ((request.query as Record<string, unknown>).force !== undefined) {
      throw new BadRequestError(
        "INVALID_PARAMETER",
        "force goes in the body of batch-delete ({ids: [...], force: true}, spec 4.3), not in the query string; the query string's force is not read.",
        { field: "force" },
      );
    }
    const ctx = ctxOf(request);
    const body = bodyObject(request.body, BATCH_DELETE_BODY, "a batch-delete body");
    const ids = arrayMember(body, "ids");
    const force = parseFlag(body.force, "force");
    return batchBody(await batchDelete(servicesOf(services, request), ctx, request.params.dim, ids, force));
  });

  // ---------------------------------------------------------------- commands (decisions §15)
  app.post<{ Params: { dim: string; name: string } }>(`${CORE}/:dim/command/:name`, async (request) => {
    const ctx = ctxOf(request);
    const body = bodyObject(request.body, COMMAND_BODY, "a command body");
    const { dim, name } = request.params;
    const result = await runCommand(servicesOf(services, request), ctx, dim, name, {
      id: body.id,
      data: body.data,
    });
    return withCascaded(
      {
        data: result.visible,
        message: `${result.dim} ${result.recordId}: ${name} done.`,
        event_id: result.eventId,
      },
      result,
    );
  });

  // ---------------------------------------------------------------- one record
  app.post<DimParams>(`${CORE}/:dim`, async (request, reply) => {
    refuseReadParametersOnWrite(request, false);
    const ctx = ctxOf(request);
    const result = await createOne(
      servicesOf(services, request),
      ctx,
      request.params.dim,
      dataObject(request.body, "a create body"),
    );
    // The body returned, not the reply (docs/decisions.md, "Handlers return their body").
    reply.status(201);
    return {
      data: result.visible,
      message: `${result.dim} ${result.recordId} created.`,
      event_id: result.eventId,
    };
  });

  const update =
    (mode: "put" | "patch") => async (request: FastifyRequest<RecordParams>, _reply: FastifyReply) => {
      refuseReadParametersOnWrite(request, false);
      const ctx = ctxOf(request);
      const { dim, id } = request.params;
      const result = await updateOne(
        servicesOf(services, request),
        ctx,
        dim,
        id,
        dataObject(request.body, `a ${mode.toUpperCase()} body`),
        mode,
      );
      return withCascaded(
        {
          data: result.visible,
          message: `${result.dim} ${result.recordId} updated.`,
          event_id: result.eventId,
        },
        result,
      );
    };
  // A revision's values written back as an update (decisions.md §19).
  app.post<{ Params: { dim: string; id: string; revision: string } }>(
    `${CORE}/:dim/:id/history/:revision/restore`,
    async (request) => {
      // It reads the revision from its path alone: `dry_run=true`, a filter… would be left unread
      // while the revision is written back (400 INVALID_PARAMETER naming it, as on reads).
      refuseReadParametersOnWrite(request, false);
      refuseUnknownNames(request.query as QueryParams, TAKES_NO_READ_PARAMETER);
      checkScopeOnlyBody(request.body, "a revision restore's body");
      const ctx = ctxOf(request);
      const { dim, id, revision } = request.params;
      const result = await restoreRevision(servicesOf(services, request), ctx, dim, id, revision);
      return withCascaded(
        {
          data: result.visible,
          message: `${result.dim} ${result.recordId} restored to revision ${revision}.`,
          event_id: result.eventId,
        },
        result,
      );
    },
  );

  app.put<RecordParams>(`${CORE}/:dim/:id`, update("put"));
  app.patch<RecordParams>(`${CORE}/:dim/:id`, update("patch"));

  app.delete<RecordParams>(`${CORE}/:dim/:id`, async (request, _reply) => {
    refuseReadParametersOnWrite(request, true);
    checkScopeOnlyBody(request.body, "a DELETE body");
    const ctx = ctxOf(request);
    const { dim, id } = request.params;
    const force = parseFlag(request.query.force, "force");
    const result = await deleteOne(servicesOf(services, request), ctx, dim, id, force);
    if (force) {
      return withCascaded(
        {
          message: `${result.dim} ${result.recordId} permanently deleted.`,
          record_id: result.recordId,
          event_id: result.eventId,
        },
        result,
      );
    }
    return withCascaded(
      {
        data: result.visible,
        message: `${result.dim} ${result.recordId} deleted.`,
        event_id: result.eventId,
      },
      result,
    );
  });
};
