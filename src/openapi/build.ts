// OpenAPI 3.1 from the metadata (decisions.md §16), for one caller: only the dimensions the caller
// may read through some menu node, with their list, detail, create and update schemas built from
// the fields the caller's grants and peso show (L for lists, D for a record, N for create, M for
// update), the parameters of the REST v4 routes, and the standard error body.
import { accessView } from "../auth/access-view.ts";
import { fieldConfig } from "../metadata/build.ts";
import { codecOf } from "../metadata/codecs.ts";
import type { ValidationRule } from "../metadata/validation-rules.ts";
import type { DataType, FieldDef, MetadataModel, RequestContext } from "../types.ts";

type Schema = Record<string, unknown>;

/** The JSON schema of a field's value (null allowed: any field may be empty in a response). */
export function valueSchema(type: DataType): Schema {
  return codecOf(type).openApiSchema;
}

/**
 * A field's TB_COST.VALIDATION rule in the caller's form as JSON Schema keywords: the pattern as
 * matched, against the whole value.
 */
export function ruleSchema(rule: ValidationRule | undefined): Schema {
  if (!rule) return {};
  const out: Schema = {};
  if (rule.pattern !== undefined) out.pattern = `^(?:${rule.pattern})$`;
  if (rule.min !== undefined) out.minimum = rule.min;
  if (rule.max !== undefined) out.maximum = rule.max;
  if (rule.min_length !== undefined) out.minLength = rule.min_length;
  if (rule.max_length !== undefined) out.maxLength = rule.max_length;
  if (rule.values !== undefined) out.enum = [...rule.values, null];
  return out;
}

function objectOf(fields: readonly FieldDef[], centerDett: string | null = null, rules = false): Schema {
  const properties: Schema = {};
  for (const f of fields) {
    properties[f.code] = {
      ...valueSchema(f.dataType),
      ...(f.description ? { title: f.description } : {}),
      ...(rules ? ruleSchema(fieldConfig(f, centerDett).validation?.rule) : {}),
    };
  }
  return { type: "object", properties };
}

const errorResponse = (description: string) => ({
  description,
  content: { "application/json": { schema: { $ref: "#/components/schemas/Error" } } },
});

const ERRORS = {
  "400": errorResponse("Bad request or validation error"),
  "401": errorResponse("Missing, invalid or expired token"),
  "403": errorResponse("Missing grant"),
  "404": errorResponse("Dimension or record not found"),
  "429": errorResponse("Rate limit exceeded"),
};

const param = (name: string, description: string, schema: Schema = { type: "string" }, required = false) => ({
  name,
  in: "query",
  required,
  description,
  schema,
});

export function buildOpenApi(model: MetadataModel, request: RequestContext, serverUrl: string): Schema {
  const schemas: Schema = {
    Error: {
      type: "object",
      required: ["error", "message", "code", "status"],
      properties: {
        error: { type: "string" },
        message: { type: "string" },
        code: { type: "string" },
        status: { type: "integer" },
        field: { type: "string" },
        details: { type: "object" },
        errors: { type: "array", items: { type: "object" } },
      },
    },
    Media: {
      type: "object",
      properties: {
        file_id: { type: "string" },
        url: { type: "string" },
        size: { type: "integer" },
        mime_type: { type: "string" },
        uploaded_at: { type: "string", format: "date-time" },
        public: { type: "boolean" },
      },
    },
    PageMeta: {
      type: "object",
      properties: {
        total: { type: ["integer", "null"] },
        total_estimated: { type: "boolean" },
        num_rows: { type: "integer" },
        offset: { type: "integer" },
        has_more: { type: "boolean" },
      },
    },
  };
  const paths: Schema = {};
  const view = accessView(request, model);
  for (const dim of [...model.dimensions.values()].sort((a, b) => a.code.localeCompare(b.code))) {
    // Through the first menu node serving the dimension the caller reads (whatever the source).
    const source = view.nodeFor(dim.code, "read");
    if (!source) continue;
    const fields = view.fields(dim);
    const ref = (suffix: string) => ({ $ref: `#/components/schemas/${dim.code}${suffix}` });
    schemas[dim.code] = objectOf(fields.withFlag("D"));
    schemas[`${dim.code}_list_item`] = objectOf(fields.withFlag("L"));
    schemas[`${dim.code}_create`] = objectOf(
      fields.withFlag("N").filter((f) => !f.system),
      request.centerDett ?? null,
      true,
    );
    schemas[`${dim.code}_update`] = objectOf(
      fields.withFlag("M").filter((f) => !f.system || f.code === "TREC"),
      request.centerDett ?? null,
      true,
    );
    const sourceParam = param(
      "source",
      `The menu node the request goes through, e.g. ${source}.`,
      { type: "string", default: source },
      true,
    );
    const centerDett = param(
      "center_dett",
      "The form the caller shows: its TB_COST.CENTER_DETT rows (flags, required, templates) apply in place of the default rows; the user's centro_dett by default. The caller's choice: any value is accepted, so these rows are presentation, never an access boundary (peso and grants apply in every form), and it never changes the row scope.",
    );
    const dataBody = (suffix: string) => ({
      required: true,
      content: {
        "application/json": {
          schema: { type: "object", required: ["data"], properties: { data: ref(suffix) } },
        },
      },
    });
    const written = {
      description: "The record as the caller may see it, and the outbox event",
      content: {
        "application/json": {
          schema: {
            type: "object",
            properties: { data: ref(""), message: { type: "string" }, event_id: { type: "string" } },
          },
        },
      },
    };
    const tag = [dim.code];
    paths[`/api/v4/core/${dim.code}`] = {
      get: {
        tags: tag,
        summary: `List ${dim.description ?? dim.code}`,
        operationId: `list_${dim.code}`,
        parameters: [
          sourceParam,
          centerDett,
          param("$filter", "Filter expression, e.g. NAME eq 'x' and startswith(CODE,'C')."),
          param("sort", "Sort keys, e.g. NAME,-CDATA."),
          param("$num_rows", "Page size (at most 1000).", { type: "integer", minimum: 0, maximum: 1000 }),
          param("$offset", "Rows to skip.", { type: "integer", minimum: 0 }),
          param("$fields", "Comma-separated fields."),
          param("$expand", "Comma-separated relations."),
          param("$search", "Words to find in the text fields."),
          param("$count", "exact, none or auto.", { type: "string", enum: ["exact", "none", "auto"] }),
        ],
        responses: {
          "200": {
            description: "A page of records",
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  properties: {
                    data: { type: "array", items: ref("_list_item") },
                    meta: { $ref: "#/components/schemas/PageMeta" },
                  },
                },
              },
            },
          },
          ...ERRORS,
        },
      },
      post: {
        tags: tag,
        summary: `Create a ${dim.code} record`,
        operationId: `create_${dim.code}`,
        parameters: [sourceParam, centerDett],
        requestBody: dataBody("_create"),
        responses: { "201": written, ...ERRORS, "422": errorResponse("A required field is missing") },
      },
    };
    const idParam = {
      name: "id",
      in: "path",
      required: true,
      description: `The record's ${dim.idField}`,
      schema: { type: "string" },
    };
    paths[`/api/v4/core/${dim.code}/{id}`] = {
      get: {
        tags: tag,
        summary: `One ${dim.code} record`,
        operationId: `get_${dim.code}`,
        parameters: [
          idParam,
          sourceParam,
          centerDett,
          param("$fields", "Comma-separated fields."),
          param("$expand", "Comma-separated relations."),
        ],
        responses: {
          "200": {
            description: "The record",
            content: { "application/json": { schema: { type: "object", properties: { data: ref("") } } } },
          },
          ...ERRORS,
        },
      },
      put: {
        tags: tag,
        summary: `Replace a ${dim.code} record (modifiable fields left out are cleared)`,
        operationId: `put_${dim.code}`,
        parameters: [idParam, sourceParam, centerDett],
        requestBody: dataBody("_update"),
        responses: { "200": written, ...ERRORS },
      },
      patch: {
        tags: tag,
        summary: `Change fields of a ${dim.code} record`,
        operationId: `patch_${dim.code}`,
        parameters: [idParam, sourceParam, centerDett],
        requestBody: dataBody("_update"),
        responses: { "200": written, ...ERRORS },
      },
      delete: {
        tags: tag,
        summary: `Cancel (or with force=true remove) a ${dim.code} record`,
        operationId: `delete_${dim.code}`,
        parameters: [
          idParam,
          sourceParam,
          param("force", "Remove for good (force-delete grant).", { type: "boolean" }),
        ],
        responses: { "200": written, ...ERRORS },
      },
    };
    // Record history (docs/decisions.md, "Record history").
    paths[`/api/v4/core/${dim.code}/{id}/history`] = {
      get: {
        tags: tag,
        summary: `The revisions of a ${dim.code} record, newest first`,
        operationId: `history_${dim.code}`,
        parameters: [
          idParam,
          sourceParam,
          param("$num_rows", "Page size (at most 1000).", { type: "integer", minimum: 0, maximum: 1000 }),
          param("$offset", "Revisions to skip.", { type: "integer", minimum: 0 }),
        ],
        responses: {
          "200": {
            description:
              "Revisions: the fields each changed, before and after (those the caller may read in detail)",
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  properties: {
                    data: {
                      type: "array",
                      items: {
                        type: "object",
                        properties: {
                          revision: { type: "integer" },
                          at: { type: "string", pattern: "^\\d{14}$" },
                          user: { type: "string" },
                          operation: {
                            type: "string",
                            enum: ["create", "update", "delete", "state", "command", "restore"],
                          },
                          changes: { type: "object" },
                        },
                      },
                    },
                    meta: { $ref: "#/components/schemas/PageMeta" },
                  },
                },
              },
            },
          },
          ...ERRORS,
        },
      },
    };
    paths[`/api/v4/core/${dim.code}/{id}/history/{revision}/restore`] = {
      post: {
        tags: tag,
        summary: `Write a revision's values back to a ${dim.code} record (an update)`,
        operationId: `restore_revision_${dim.code}`,
        parameters: [
          idParam,
          {
            name: "revision",
            in: "path",
            required: true,
            description: "The revision's number",
            schema: { type: "integer", minimum: 1 },
          },
          sourceParam,
        ],
        responses: { "200": written, ...ERRORS },
      },
    };
    // Export and import (docs/decisions.md, "Export and import").
    paths[`/api/v4/core/${dim.code}/export`] = {
      get: {
        tags: tag,
        summary: `Every ${dim.code} record the list's parameters match, streamed (no row limit)`,
        operationId: `export_${dim.code}`,
        parameters: [
          sourceParam,
          centerDett,
          param("format", "csv (default), ndjson or json.", {
            type: "string",
            enum: ["csv", "ndjson", "json"],
          }),
          param("$filter", "Filter expression."),
          param("sort", "Sort keys, e.g. NAME,-CDATA."),
          param("$fields", "Comma-separated fields."),
          param("$search", "Words to find in the text fields."),
        ],
        responses: {
          "200": {
            description: "The records: CSV with a header row of field codes, NDJSON, or a JSON array",
            content: {
              "text/csv": { schema: { type: "string" } },
              "application/x-ndjson": { schema: { type: "string" } },
              "application/json": { schema: { type: "array", items: ref("_list_item") } },
            },
          },
          ...ERRORS,
        },
      },
    };
    paths[`/api/v4/core/${dim.code}/import`] = {
      post: {
        tags: tag,
        summary: `Create (or with mode=upsert update) ${dim.code} records from a CSV or NDJSON body`,
        operationId: `import_${dim.code}`,
        parameters: [
          sourceParam,
          centerDett,
          param("mode", "create (default) or upsert.", { type: "string", enum: ["create", "upsert"] }),
          param("atomic", "All rows or none.", { type: "boolean" }),
        ],
        requestBody: {
          required: true,
          content: {
            "text/csv": { schema: { type: "string" } },
            "application/x-ndjson": { schema: { type: "string" } },
          },
        },
        responses: {
          "200": {
            description:
              "What the import did: rows received, created, updated, unchanged (upsert rows holding their stored values: nothing written), failed, the first 100 errors; warnings (absent if none): FIELDS_IGNORED, the system columns (TREC, audit, CENTRO_DETT) it did not write",
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  properties: {
                    data: {
                      type: "object",
                      properties: {
                        received: { type: "integer" },
                        created: { type: "integer" },
                        updated: { type: "integer" },
                        unchanged: { type: "integer" },
                        failed: { type: "integer" },
                        errors: {
                          type: "array",
                          items: {
                            type: "object",
                            properties: {
                              row: { type: "integer" },
                              field: { type: ["string", "null"] },
                              code: { type: "string" },
                              message: { type: "string" },
                            },
                          },
                        },
                        warnings: {
                          type: "array",
                          items: {
                            type: "object",
                            properties: {
                              code: { type: "string" },
                              message: { type: "string" },
                              details: { type: "object" },
                            },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
          ...ERRORS,
          "413": errorResponse(
            "The body is over IMPORT_MAX_BYTES, or an atomic import over IMPORT_ATOMIC_MAX_ROWS, or its events (one transaction) over REQUEST_EVENTS_MAX_BYTES",
          ),
          "415": errorResponse("The body is not text/csv or application/x-ndjson in UTF-8"),
          "503": errorResponse(
            "SERVICE_CLOSING: the service shut down while the import was under way (details: the rows written before); IMPORT_SPOOL_FULL: the bodies of the imports under way hold IMPORT_SPOOL_MAX_BYTES, nothing written (Retry-After); IMPORT_TURN_TIMEOUT: the body was received but got no turn in the tenant's heavy lane within IMPORT_WRITE_TIMEOUT_MS, nothing written (Retry-After)",
          ),
          "504": errorResponse(
            "IMPORT_WRITE_TIMEOUT: the rows took longer than IMPORT_WRITE_TIMEOUT_MS to write (details: the rows written before)",
          ),
        },
      },
    };
    paths[`/api/v4/core/${dim.code}/count`] = {
      get: {
        tags: tag,
        summary: `Count ${dim.code} records`,
        operationId: `count_${dim.code}`,
        parameters: [
          sourceParam,
          centerDett,
          param("$filter", "Filter expression."),
          param("$search", "Words to find."),
        ],
        responses: {
          "200": {
            description: "The count",
            content: {
              "application/json": {
                schema: {
                  type: "object",
                  properties: {
                    count: { type: "integer" },
                    dimension: { type: "string" },
                    filters_applied: { type: "object" },
                  },
                },
              },
            },
          },
          ...ERRORS,
        },
      },
    };
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Dimensio REST v4",
      version: String(model.version),
      description:
        "Generated from the metadata for the calling user: the dimensions and fields this caller may see. GraphQL: /graphql.",
    },
    servers: [{ url: serverUrl }],
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: { bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" } },
      schemas,
    },
  };
}
