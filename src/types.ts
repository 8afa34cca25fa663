// Types shared across modules. Everything that crosses a module boundary is declared here.
import type { ViewCache } from "./auth/view-cache.ts";
import type { CompiledRule } from "./metadata/validation-rules.ts";

// ---------------------------------------------------------------- configuration

export type Role = "all" | "gateway" | "read" | "write" | "auth" | "relay" | "webhooks";

/**
 * What a process knows of one dependency (GET /healthz, dimensio_dependency_up): `up`, `down`,
 * `idle` (configured, no connection opened yet: it opens on first use), `embedded` (the in-process
 * alternative: nothing to be away), `unknown` (no request has told yet).
 */
export type DependencyState = "up" | "down" | "idle" | "embedded" | "unknown";

export interface RateLimitConfig {
  userPerSecond: number;
  userPerMinute: number;
  userPerHour: number;
  tenantPerMinute: number;
  tenantPerHour: number;
  /** Requests without a user (no or bad token) per client IP. */
  anonymousPerMinute: number;
}

/** One database profile's connection strings (secrets: never stored in a table). */
export interface DatabaseProfileConfig {
  url: string;
  readUrl: string | null;
  /** Where the profile's LISTEN connects (direct, when `url` is a PgBouncer); `url` when null. */
  listenUrl: string | null;
}

export interface Config {
  nodeEnv: string;
  host: string;
  port: number;
  logLevel: string;
  dataDir: string;
  databaseUrl: string | null;
  databaseReadUrl: string | null;
  /**
   * PostgreSQL: where LISTEN connects (a direct connection, not through PgBouncer); DATABASE_URL
   * when unset.
   */
  databaseListenUrl: string | null;
  /**
   * PostgreSQL: `transaction` when DATABASE_URL is a PgBouncer in transaction pooling mode: no
   * session state is relied on across transactions (unnamed statements). Default `session`.
   */
  databasePoolMode: "session" | "transaction";
  /**
   * Database profiles (decisions.md §18): profile NAME from DATABASE_URL_<NAME> and the optional
   * DATABASE_READ_URL_<NAME>, names upper-case. A tenant whose TB_TENANT.DATABASE names one keeps
   * its records there (src/db/profiles.ts).
   */
  databaseProfiles: Record<string, DatabaseProfileConfig>;
  amqpUrl: string | null;
  redisUrl: string | null;
  eventsExchange: string;
  s3: {
    endpoint: string | null;
    bucket: string | null;
    region: string;
    accessKeyId: string | null;
    secretAccessKey: string | null;
    forcePathStyle: boolean;
  };
  jwt: {
    secret: string | null;
    issuer: string;
    audience: string | null;
    publicKeysPath: string | null;
  };
  rateLimit: RateLimitConfig;
  /** Login attempts per minute, per client IP and per username. */
  loginRateLimit: { perIpPerMinute: number; perUsernamePerMinute: number };
  accessTokenActiveS: number;
  accessTokenRenewableS: number;
  refreshTokenTtlS: number;
  webhookRetryBaseMs: number;
  webhookAllowPrivate: boolean;
  /** Webhook deliveries in flight at once, in all, per registration and per tenant. */
  webhookConcurrency: number;
  webhookConcurrencyPerReceiver: number;
  webhookConcurrencyPerTenant: number;
  /** Webhook registrations one tenant may have (a further one: 409 WEBHOOK_LIMIT_REACHED). */
  webhookMaxPerTenant: number;
  /** How often the embedded database's planner statistics are refreshed (ANALYZE); 0: never. */
  dbAnalyzeIntervalMs: number;
  /** Uploads: the largest file, and the content types (sniffed from the bytes) accepted. */
  media: { maxBytes: number; allowedTypes: string[]; uploadsPerUser: number; uploadsPerTenant: number };
  events: {
    /** Outbox rows the relay claims and publishes per transaction (the most it holds in memory). */
    batchSize: number;
    /** The relay's safety-net poll; it is woken by NOTIFY after every commit. */
    pollMs: number;
    /** Under a stream of events, how long the relay gathers rows before its next claim (0: never). */
    gatherMs: number;
    /** Published outbox rows are deleted this long after publication (0: kept). */
    retentionMs: number;
    /** A subscriber's message is dead-lettered after this many failed attempts. */
    maxFailures: number;
    /** Messages an in-process subscriber's queue holds before the relay waits (EVENTS_MEMORY_QUEUE_MAX). */
    memoryQueueMax: number;
  };
  /** Record history (decisions.md §19, src/history/). */
  history: {
    /** HISTORY_RETENTION_DAYS: revisions older than this go (0: kept); a record's latest stays. */
    retentionDays: number;
    /** HISTORY_PRUNE_INTERVAL_MS: how often the clean-up runs (0: never). */
    pruneIntervalMs: number;
  };
  role: Role;
  gateway: {
    readBackendUrl: string | null;
    writeBackendUrl: string | null;
    authBackendUrl: string | null;
    canaryReadUrl: string | null;
    canaryWriteUrl: string | null;
    microserviceRoutes: Record<string, string>;
    developerRoutes: Record<string, string>;
    secret: string | null;
    /** A backend slower than this is a 504 BACKEND_TIMEOUT. */
    backendTimeoutMs: number;
  };
  /** METRICS_TOKEN: GET /metrics needs `Authorization: Bearer <it>` when set (null: open). */
  metricsToken: string | null;
  corsOrigins: string[] | true;
  /**
   * The service's public base URL (PUBLIC_URL, no trailing slash): OpenAPI's `servers`. Null: a
   * relative server ("/"), never one made of the request's Host header.
   */
  publicUrl: string | null;
  /**
   * Peers whose X-Forwarded-For names the client (Fastify's trustProxy): false (none), a number
   * of proxies in front, or their addresses/CIDRs.
   */
  trustProxy: false | number | string[];
  loadDemoData: boolean;
  maxBatchSize: number;
  /**
   * The most creates one group-commit statement writes (src/resolvers/write/create-groups.ts);
   * 1: each create alone.
   */
  createGroupMaxRows: number;
  bodyLimitBytes: number;
  /**
   * Largest body of an import (`POST /{dim}/import`, decisions §20), counted as it is spooled to
   * disk: 413 beyond.
   */
  importMaxBytes: number;
  /** Most rows of an import with `atomic=true` (all rows or none): 413 beyond. */
  importAtomicMaxRows: number;
  /**
   * An import writes the rows of its received body for at most this long (checked before each
   * batch): 504 IMPORT_WRITE_TIMEOUT beyond, the batches written before staying.
   */
  importWriteTimeoutMs: number;
  /** Where import bodies are spooled (a directory of the process's own is made in it). */
  importSpoolDir: string;
  /**
   * The bytes of import bodies this process holds in its spool at once (IMPORT_SPOOL_MAX_BYTES,
   * default 1 GiB): past it an import answers 503 IMPORT_SPOOL_FULL with Retry-After.
   */
  importSpoolMaxBytes: number;
  /**
   * An index a metadata change adds to an existing table is built after the change commits
   * (CREATE INDEX CONCURRENTLY) for at most this long (INDEX_BUILD_TIMEOUT_MS, default 1 h; 0: no
   * limit), on a connection of its own: not under the statement timeout of requests.
   */
  indexBuildTimeoutMs: number;
  /** Receiving a whole request (headers and body) takes at most this long: 408 beyond. */
  requestTimeoutMs: number;
  /** A statement, and a transaction as a whole, runs at most this long: 504 beyond. */
  statementTimeoutMs: number;
  /** PostgreSQL: a request waits at most this long for a connection: 503 DATABASE_UNAVAILABLE beyond. */
  databaseConnectTimeoutMs: number;
  /**
   * PostgreSQL: a statement unanswered this long makes the watchdog probe the server; no answer
   * within as long again answers 503 DATABASE_UNAVAILABLE at once (src/db/watchdog.ts). 0: off.
   */
  databaseWatchdogMs: number;
  /** Largest TEXT or JSON value (and STRING without LENGTH), in UTF-8 bytes: 400 beyond. */
  fieldMaxBytes: number;
  /** Largest total of event payloads one request may write to the outbox: 413 beyond. */
  requestEventsMaxBytes: number;
  /**
   * GraphQL operations deeper, selecting more fields, with more aliases or resolving more values
   * (lists at their limit) than this are refused (QUERY_TOO_COMPLEX; src/graphql/complexity.ts).
   */
  graphql: {
    maxDepth: number;
    maxCost: number;
    maxAliases: number;
    maxNodes: number;
    /**
     * A tenant's GraphQL read statements running at once in a process; the others wait. 0: one on
     * the embedded database (it runs one statement at a time anyway), four on PostgreSQL.
     */
    tenantStatements: number;
    /** The longest GraphQL document (query text) accepted, in bytes: 413 beyond (data goes in variables). */
    maxDocumentBytes: number;
    /** Bytes of parsed documents a process keeps, keyed by the hash of their text. */
    documentCacheBytes: number;
    /** The largest body of a GraphQL request (document and variables): 413 beyond, unread. */
    maxBodyBytes: number;
    /**
     * Queries and mutations run over a plan made once per document
     * (src/graphql/planned-execution.ts); false: every operation by graphql-js's interpreter alone
     * (the answers are the same).
     */
    plannedExecution: boolean;
    /** Persisted operations (src/graphql/persisted.ts): registrations' bounds, trusted documents. */
    persisted: {
      maxPerTenant: number;
      maxBytesPerTenant: number;
      /** GRAPHQL_TRUSTED_DOCUMENTS read at start-up: documents by the hex SHA-256 of their text. */
      trustedDocuments: ReadonlyMap<string, string> | null;
      trustedOnly: boolean;
    };
  };
  /** Live GraphQL subscriptions: per user (in this process) and per process (429 beyond). */
  subscriptions: { maxPerUser: number; maxPerProcess: number; maxPerTenant: number };
  /** GraphQL over WebSocket (src/graphql/websocket.ts): backpressure, heartbeats, sockets per user. */
  /** GraphQL over WebSocket: unsent bytes per socket, pings, and open sockets per user, per tenant and per process. */
  webSocket: {
    maxBufferedBytes: number;
    keepAliveMs: number;
    maxSocketsPerUser: number;
    maxSocketsPerTenant: number;
    maxSockets: number;
  };
  /**
   * Heavy requests per tenant (src/http/heavy-requests.ts); `bodyBytes`: a body this large (or of
   * unknown length) is read and parsed in the tenant's lane (0: never); `bufferBytes`: the most of
   * such bodies a tenant may have received and held (arriving, or waiting for their turn) at once.
   */
  heavyRequests: {
    thresholdValues: number;
    perTenant: number;
    maxWaiting: number;
    bodyBytes: number;
    bufferBytes: number;
  };
  /** meta.total is exact up to this many matching records, the planner's estimate beyond. */
  countExactLimit: number;
  /** How long a process keeps a total it counted, at most (forgotten at once on any write); 0: none. */
  countCacheMs: number;
  /** How long a process keeps a verified session (invalidated by NOTIFY); 0: read it every time. */
  sessionCacheMs: number;
}

// ---------------------------------------------------------------- database

export interface QueryResult<R> {
  rows: R[];
  rowCount: number;
}

/**
 * How PostgreSQL plans a prepared statement's executions: "custom", anew for its values (the
 * default: a read's best plan depends on them), or "generic", once per connection and kept
 * (src/db/connection.ts).
 */
export type PlanMode = "custom" | "generic";

export interface QueryOptions {
  /**
   * Run as a named prepared statement on PostgreSQL (parsed and planned once per connection).
   * The value namespaces the statement: pass the metadata version, so that a table change made by
   * a later version never meets a plan cached for an earlier one. Ignored on PGlite.
   */
  prepare?: string | number;
  /**
   * "generic": the statement's best plan does not depend on its values (an INSERT … VALUES, a
   * look-up by key), so PostgreSQL plans it once per connection and keeps the plan, instead of
   * planning every execution (src/db/connection.ts). Only with `prepare`, and only for a
   * statement sent outside a transaction (on its own, or a transaction's lastStatement sent on
   * its own); elsewhere, and on PGlite, it runs as any other.
   */
  plan?: PlanMode;
}

export interface TransactionOptions {
  /**
   * "generic": every prepared statement of the transaction keeps one plan per connection (as
   * QueryOptions.plan): a transaction of statements on fixed tables whose plans do not depend on
   * their values (the event side's). PostgreSQL only.
   */
  plan?: PlanMode;
}

/** Something that runs parameterised SQL: the database itself or an open transaction. */
export interface Queryable {
  query<R = Record<string, unknown>>(
    text: string,
    params?: readonly unknown[],
    opts?: QueryOptions,
  ): Promise<QueryResult<R>>;
  /**
   * Open transactions only: `work` (whose statements were sent already) is awaited when the
   * transaction ends, so that nothing waits for its answer before then. On PostgreSQL its last
   * statement and COMMIT then travel together: one round trip (the outbox row of a write).
   */
  defer?(work: Promise<unknown>): void;
  /**
   * Open transactions on PostgreSQL only: wake the listeners of `channel` once the transaction
   * has committed; this process's own at once, other processes' through a NOTIFY folded with
   * those of other transactions (at most one per channel every few milliseconds under load).
   * `item` says what the transaction changed: the payload the listeners get names the items of the
   * commits it covers (src/db/notice.ts), or is empty (anything changed) when one named none.
   */
  notifyAfterCommit?(channel: string, item?: string): void;
  /**
   * Open transactions on PostgreSQL only: the transaction's last statement, whose commit wakes the
   * listeners of `notice.channel` with `notice.item` (as notifyAfterCommit). When the transaction
   * has sent nothing before it, it is sent on its own, outside BEGIN and COMMIT: a statement is a
   * transaction of its own, so the whole transaction is one round trip, and nothing may be sent
   * after it. `text(payload)` is its SQL: with `payload` a placeholder (`$n`, one past `params`,
   * whose value the handle appends) it calls pg_notify(channel, <payload>) itself (the wake-up of
   * other processes, folded with other commits' as notifyAfterCommit folds them). After
   * statements sent before it, it is the transaction's last statement (`payload` null), COMMIT
   * sent right behind it without waiting for its answer (should it fail, that COMMIT rolls back).
   * Either way nothing may be sent after it, and nothing after it can roll the write back.
   */
  lastStatement?<R = Record<string, unknown>>(
    notice: { channel: string; item?: string },
    text: (payload: string | null) => string,
    params: readonly unknown[],
    opts?: QueryOptions,
  ): Promise<QueryResult<R>>;
}

export interface Database extends Queryable {
  readonly kind: "pglite" | "postgres";
  /** Runs fn in one transaction: commit when it resolves, rollback when it throws. */
  transaction<T>(fn: (tx: Queryable) => Promise<T>, opts?: TransactionOptions): Promise<T>;
  /**
   * Subscribes to a NOTIFY channel; resolves to an unsubscribe function. When the listening
   * connection breaks, `onLost` is called at once; once listening again, `onBack` and then
   * `onPayload("")` say that notifications may have been missed meanwhile.
   */
  listen(
    channel: string,
    onPayload: (payload: string) => void,
    opts?: { onLost?: () => void; onBack?: () => void },
  ): Promise<() => Promise<void>>;
  /**
   * Resolves once every process listening on this database has told its listeners every notice
   * committed before the call (each process's listening connection answers a probe sent behind
   * them), or after `timeoutMs` (default 2 s) for one that does not answer. What a revocation
   * waits for before it answers: no process keeps what the notice ended.
   */
  listenersCaughtUp(timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

// ---------------------------------------------------------------- metadata

export const DATA_TYPES = [
  "STRING",
  "TEXT",
  "INTEGER",
  "DECIMAL",
  "BOOLEAN",
  "DATE",
  "TIMESTAMP",
  "JSON",
  "MEDIA",
] as const;
export type DataType = (typeof DATA_TYPES)[number];

/** COD_ON_OFF letters: L list, D detail, N create, M modify, R search. */
export type Flag = "L" | "D" | "N" | "M" | "R";
export type AuditStyle = "TREC" | "CREATED";

/** One TB_COST row as it applies to a field in one center_dett context. */
export interface FieldConfig {
  readonly numCost: number | null;
  readonly codOnOff: string;
  readonly flags: ReadonlySet<Flag>;
  readonly required: boolean;
  readonly renderHint: string | null;
  readonly groupName: string | null;
  readonly valueTemp: string | null;
  /** Field weight: visible to users whose peso is <= this value; null = everyone. */
  readonly codUtente: number | null;
  /** TB_COST.VALIDATION: the value rules of create and update (issue 39 §3); null: none. */
  readonly validation: CompiledRule | null;
  /** TB_COST.VALIDATION as stored (GET /COST shows it); null: none. */
  readonly validationSource: unknown;
}

export interface FieldDef {
  readonly dim: string;
  readonly code: string;
  readonly numVar: number;
  readonly description: string | null;
  readonly dataType: DataType;
  /** DATA_TYPE as written in TB_VAR (before synonym resolution). */
  readonly declaredType: string;
  readonly length: number | null;
  readonly decimals: number;
  readonly nullable: boolean;
  /** TB_VAR.INDEXED: the table has an index on (TENANT_ID, field, id). */
  readonly indexed: boolean;
  /** TB_VAR.TIPO_CAMPO as written (AC, VARS, or another kind). */
  readonly kind: string | null;
  /** AC or VARS: a foreign key whose destination is in TB_OBJECT. */
  readonly fkKind: "AC" | "VARS" | null;
  /** TB_VAR.TIPO_VAR: destination dimension code. */
  readonly targetDim: string | null;
  readonly isId: boolean;
  /** Audit fields and the like: not in TB_VAR, never writable. */
  readonly system: boolean;
  /** The TB_COST row with CENTER_DETT null (or a synthetic one for system fields). */
  readonly config: FieldConfig;
  /** TB_COST rows bound to one center_dett value, replacing `config` in that context. */
  readonly contextConfigs: ReadonlyMap<string, FieldConfig>;
}

export interface Relation {
  /** Name under which $expand embeds it. */
  readonly name: string;
  /** The dimension holding the foreign key. */
  readonly fromDim: string;
  readonly fromField: string;
  /** The dimension the key points at. */
  readonly toDim: string;
  readonly toField: string;
  /** Display field of the destination (vars lookups). */
  readonly descField: string | null;
}

/**
 * A relation as seen from one of its two dimensions, under the name it has there: forward where
 * the dimension holds the foreign key, reverse where another dimension points at it.
 */
export interface NamedRelation {
  readonly relation: Relation;
  readonly direction: "forward" | "reverse";
  /** The dimension at the relation's other end. */
  readonly target: string;
  /** This dimension's field whose value is the key (forward: the foreign key; reverse: the referenced key). */
  readonly parentKey: string;
  /** The target's field matched against the key. */
  readonly targetKey: string;
}

export interface SortDef {
  readonly key: string;
  readonly description: string | null;
  readonly expr: string;
}

export interface DimensionDef {
  readonly code: string;
  readonly description: string | null;
  readonly tableName: string;
  readonly idField: string;
  readonly idType: "INTEGER" | "STRING";
  readonly auditStyle: AuditStyle;
  readonly cascadeDelete: readonly string[];
  readonly insertCascade: readonly string[];
  readonly updateCascade: readonly string[];
  /** TB_VAR fields by NUM_VAR, then the system (audit) fields. TENANT_ID is not among them. */
  readonly fields: readonly FieldDef[];
  readonly fieldsByCode: ReadonlyMap<string, FieldDef>;
  /** Relations where this dimension holds the foreign key (expand gives one object). */
  readonly relations: readonly Relation[];
  /** Relations where another dimension points here (expand gives an array, named by the child code). */
  readonly reverseRelations: readonly Relation[];
  /** Both kinds by the name they have here (a forward name wins over a reverse one). */
  readonly relationsByName: ReadonlyMap<string, NamedRelation>;
  readonly sorts: ReadonlyMap<string, SortDef>;
  /** TB_DIM.INDEXES: the fields of each composite index, in order (TENANT_ID before, the id after). */
  readonly compositeIndexes: ReadonlyArray<readonly string[]>;
  /** TB_DIM.HISTORY (default true): each change of a record writes a revision (src/history/). */
  readonly history: boolean;
  /**
   * TB_DIM.ROW_SCOPE (decisions.md §17): the scope keys rows are restricted by, each with the
   * column holding it (CENTRO_DETT, AMBIENTE: system columns; owner: OWNER or CREATED_BY). Empty:
   * unscoped.
   */
  readonly rowScope: readonly RowScopeKey[];
}

export const ROW_SCOPE_KEYS = ["centro_dett", "ambiente", "owner"] as const;
export type RowScopeKeyName = (typeof ROW_SCOPE_KEYS)[number];
export interface RowScopeKey {
  readonly key: RowScopeKeyName;
  readonly column: string;
}

export interface MenuNode {
  readonly code: string;
  readonly nleft: number;
  readonly nright: number;
  readonly description: string | null;
  readonly dim: string | null;
}

export interface DocumentDef {
  readonly name: string;
  readonly rootDim: string;
  readonly definition: unknown;
}

/** The immutable metadata of one database, as loaded at one metadata version. */
export interface MetadataModel {
  readonly version: number;
  readonly dimensions: ReadonlyMap<string, DimensionDef>;
  readonly menu: readonly MenuNode[];
  readonly menuByCode: ReadonlyMap<string, MenuNode>;
  readonly documents: ReadonlyMap<string, DocumentDef>;
  /** The access views computed under this version (src/auth/view-cache.ts): dropped with it. */
  readonly accessViews: ViewCache;
}

/** Raw metadata rows, as stored in the metadata tables and written in fixtures. */
export interface MetadataRows {
  TB_DIM: Array<{
    COD_DIM: string;
    DESC_DIM?: string | null;
    TABLE_NAME: string;
    ID_FIELD: string;
    CASCADE_DELETE?: string | null;
    INSERT_CASCADE?: string | null;
    UPDATE_CASCADE?: string | null;
    AUDIT_STYLE?: string | null;
    INDEXES?: string | null;
    HISTORY?: boolean | null;
    ROW_SCOPE?: string | null;
  }>;
  TB_VAR: Array<{
    COD_DIM: string;
    NUM_VAR: number;
    COD_VAR: string;
    DESC_VAR?: string | null;
    DATA_TYPE: string;
    LENGTH?: number | null;
    DECIMALS?: number | null;
    NULLABLE?: boolean | null;
    TIPO_CAMPO?: string | null;
    TIPO_VAR?: string | null;
    INDEXED?: boolean | null;
  }>;
  TB_COST: Array<{
    COD_DIM: string;
    NUM_COST: number;
    COD_VAR: string;
    COD_ON_OFF?: string | null;
    REQUIRED?: boolean | null;
    RENDER_HINT?: string | null;
    GROUP_NAME?: string | null;
    VALUE_TEMP?: string | null;
    COD_UTENTE?: number | null;
    CENTER_DETT?: string | null;
    /** Value rules, an object or its JSON text (src/metadata/validation-rules.ts). */
    VALIDATION?: unknown;
  }>;
  TB_OBJECT: Array<{
    COD_DIM: string;
    COD_VAR: string;
    COD_DIM_OBJ: string;
    COD_VAR_OBJ: string;
    REL_NAME?: string | null;
    COD_VAR_DESC?: string | null;
  }>;
  TB_MENU: Array<{
    COD_MENU: string;
    NLEFT: number;
    NRIGHT: number;
    DESC_MENU?: string | null;
    COD_DIM?: string | null;
  }>;
  TB_SORT: Array<{ COD_DIM: string; SORT_KEY: string; DESC_SORT?: string | null; SORT_EXPR: string }>;
  TB_DOCUMENT: Array<{ DOC_NAME: string; COD_DIM: string; DEFINITION: unknown }>;
}

/** A problem found while validating metadata or a fixture. */
export interface Problem {
  /** Where: e.g. `TB_VAR[3].DATA_TYPE`. */
  readonly path: string;
  readonly message: string;
  /** A code for the kind of problem (RESERVED_NAME), when it has one of its own. */
  readonly code?: string;
}

// ---------------------------------------------------------------- identity and access

/** The operations a grant may hold (decisions §6). */
export const OPERATIONS = ["read", "write", "force_delete", "metadata", "all_rows"] as const;
export type Operation = (typeof OPERATIONS)[number];

/** A grant as held in the session: a TB_MENU node with its nested-set bounds. */
export interface Grant {
  COD_MENU: string;
  NLEFT: number;
  NRIGHT: number;
  OPERATIONS: Operation[];
  LEVEL: number;
  /** A $filter expression rows must match (decisions.md §17), with {user}, {tenant}… placeholders. */
  ROW_FILTER?: string | null;
}

/** Who is calling and in which context: what every resolver receives. */
export interface Principal {
  userId: string;
  tenantId: string;
  sessionId: string;
  /** 1 admin, 2 manager, 3 user. */
  peso: number;
  centroDett: string | null;
  ambiente: string | null;
  lingua: string | null;
  grants: Grant[];
}

/** The kind of access a request asks for on a dimension. */
export type Access = "read" | "create" | "update" | "delete" | "force_delete" | "metadata";

/** Who is calling: authenticated once per HTTP request, independent of any source. */
export interface Caller {
  principal: Principal;
  requestId: string;
  now: () => Date;
}

/** Where one resolver call reads or writes: given by the adapter for each call. */
export interface Scope {
  /** A TB_MENU node code (REST: the `source` parameter; GraphQL: each field's `source` argument). */
  source: string | null;
  /** The field-visibility context (`center_dett`); defaults to the user's. */
  centerDett: string | null;
}

/**
 * What every resolver receives: the caller and the scope of this call. Adapters build one per call
 * (one GraphQL operation touches several dimensions through several sources).
 */
export interface RequestContext extends Caller, Scope {}

/** The caller in a scope: `center_dett` defaults to the user's own. */
export function inScope(caller: Caller, source: string | null, centerDett?: string | null): RequestContext {
  // Spelled out, not spread: one shape for every context, built without copying by enumeration.
  return {
    principal: caller.principal,
    requestId: caller.requestId,
    now: caller.now,
    source,
    centerDett: centerDett ?? caller.principal.centroDett,
  };
}

// ---------------------------------------------------------------- writes (issue 5: write pipeline)

/**
 * The named steps of the write pipeline, in the order a create passes them. WriteContext.onStep
 * is told each one (tests inject failures there; production passes no hook).
 */
export type WriteStep =
  | "authorize"
  | "metadata"
  | "load"
  | "templates"
  | "field_rules"
  | "types"
  | "required"
  | "foreign_keys"
  | "record"
  | "outbox"
  | "cascades"
  | "commit";

export type WriteAction = "created" | "updated" | "deleted";

/** One record changed by a write: the direct one or one changed by a cascade. */
export interface RecordChange {
  dim: string;
  action: WriteAction;
  recordId: string | number;
  /** The stored record after the change (for a force delete: as it was); TENANT_ID left out. */
  record: Record<string, unknown>;
  /** OUTBOX_ID of the change's event, as a string. */
  eventId: string;
  /** True for a physical (force) delete. */
  force: boolean;
}

export interface WriteResult extends RecordChange {
  /** Records created by the insert cascade (child records in the create body), in body order. */
  children: WriteResult[];
  /** Records changed by delete and update cascades, in the order they were changed. */
  cascaded: RecordChange[];
}

/**
 * What a write resolver returns to an adapter: the change, plus the record as the caller may see
 * it (fields with D in the request's context, peso applied, id and audit fields, insert-cascade
 * children), so no adapter can leak what the caller may not read. Only the outbox gets `record`,
 * the stored row. `visible` is null after a force delete.
 */
export interface WriteOutcome extends WriteResult {
  visible: Record<string, unknown> | null;
}

/** The error of one failed record of a batch: the standard error body's members. */
export interface BatchItemError {
  error: string;
  code: string;
  message: string;
  status: number;
  field?: string;
  /** The error's details (INVALID_FIELD_VALUE: the rule broken and what it expects). */
  details?: Record<string, unknown>;
}

export interface BatchItemResult {
  index: number;
  /** The record id (null when a create failed before one was known). */
  id: string | number | null;
  status: "created" | "updated" | "deleted" | "failed";
  result?: WriteResult;
  error?: BatchItemError;
}

export interface BatchResult {
  success: number;
  failed: number;
  results: BatchItemResult[];
}

/** One operation of POST /api/v4/core/batch (docs/decisions.md, "Writes"). */
export interface CoreBatchOperation {
  method: "POST" | "PUT" | "PATCH" | "DELETE";
  dim: string;
  id?: string | number;
  data?: Record<string, unknown>;
  force?: boolean;
  /** Name later operations use to refer to this one's record: "@{ref}" or "@{ref.FIELD}". */
  ref?: string;
  /** Security area for this operation; the request's source when absent. */
  source?: string;
}

export interface CoreBatchOperationResult {
  index: number;
  ref: string | null;
  method: CoreBatchOperation["method"];
  dim: string;
  result: WriteOutcome;
}

/** Metadata tables writable through /api/v4/core/{code} (level 4). */
export type MetadataCode = "DIM" | "VAR" | "COST" | "OBJECT" | "MENU" | "SORT" | "DOCUMENT";

/** One metadata row changed by a metadata write (rows removed along with a DIM or VAR included). */
export interface MetadataChange {
  code: MetadataCode;
  action: WriteAction;
  /** Key columns joined with "/", e.g. "CUST/EMAIL" (the event's AGGREGATE_ID). */
  key: string;
  row: Record<string, unknown>;
  eventId: string;
}

export interface MetadataWriteResult extends MetadataChange {
  /** The metadata version after the write. */
  version: number;
  /** Rows created or removed along with the row (a new DIM's fields; a removed DIM's or VAR's rows). */
  related: MetadataChange[];
  /** What the committed change left undone (an index build cancelled past its bound); absent if nothing. */
  warnings?: MetadataWarning[];
}

/**
 * Work that a metadata change, already committed, did not finish (decisions.md, "A cancelled index
 * build is a warning"): answered in the success body's `warnings`, not as an error.
 */
export interface MetadataWarning {
  code: string;
  message: string;
  details?: Record<string, unknown>;
}
