import type { AuditStyle, DataType, Flag } from "../types.ts";

const SYNONYMS: Record<string, DataType> = {
  STRING: "STRING",
  VARCHAR: "STRING",
  CHAR: "STRING",
  TEXT: "TEXT",
  INTEGER: "INTEGER",
  INT: "INTEGER",
  BIGINT: "INTEGER",
  DECIMAL: "DECIMAL",
  NUMBER: "DECIMAL",
  NUMERIC: "DECIMAL",
  FLOAT: "DECIMAL",
  BOOLEAN: "BOOLEAN",
  BOOL: "BOOLEAN",
  DATE: "DATE",
  TIMESTAMP: "TIMESTAMP",
  DATETIME: "TIMESTAMP",
  JSON: "JSON",
  MEDIA: "MEDIA",
};

/** DATA_TYPE of TB_VAR, case-insensitive with the synonyms of decisions.md section 3. */
export function normalizeDataType(declared: string): DataType | null {
  return SYNONYMS[declared.trim().toUpperCase()] ?? null;
}

export const FLAG_LETTERS: readonly Flag[] = ["L", "D", "N", "M", "R"];

export function parseFlags(codOnOff: string): Set<Flag> {
  const flags = new Set<Flag>();
  for (const ch of codOnOff.toUpperCase()) if ((FLAG_LETTERS as string[]).includes(ch)) flags.add(ch as Flag);
  return flags;
}

// ---------------------------------------------------------------- values every type shares

// With the u flag a well-formed pair is one code point; only a lone surrogate matches \p{Cs}.
const UNPAIRED_SURROGATE = /\p{Cs}/u;

/** Whether PostgreSQL text can hold `s`: no NUL character, no unpaired UTF-16 surrogate. */
export function storableText(s: string): boolean {
  return !s.includes("\u0000") && !UNPAIRED_SURROGATE.test(s);
}

/** Whether a JSON value holds a string (or key) with an unpaired UTF-16 surrogate. */
export function hasUnpairedSurrogate(value: unknown): boolean {
  if (typeof value === "string") return UNPAIRED_SURROGATE.test(value);
  if (Array.isArray(value)) return value.some(hasUnpairedSurrogate);
  if (value !== null && typeof value === "object") {
    return Object.entries(value).some(([k, v]) => UNPAIRED_SURROGATE.test(k) || hasUnpairedSurrogate(v));
  }
  return false;
}

/**
 * Whether `value` (parsed JSON) holds a number JSON cannot write: a literal beyond a double's range
 * (1e400) parses to Infinity, which JSON.stringify would store as null.
 */
export function hasNonFiniteNumber(value: unknown): boolean {
  if (typeof value === "number") return !Number.isFinite(value);
  if (Array.isArray(value)) return value.some(hasNonFiniteNumber);
  if (value !== null && typeof value === "object") return Object.values(value).some(hasNonFiniteNumber);
  return false;
}

/** Whether 8 (YYYYMMDD) or 14 (YYYYMMDDHHmmss) digits name a real calendar moment. */
export function validCalendar(v: string): boolean {
  if (!/^\d{8}(?:\d{6})?$/.test(v)) return false;
  const y = Number(v.slice(0, 4));
  const m = Number(v.slice(4, 6));
  const d = Number(v.slice(6, 8));
  const date = new Date(Date.UTC(y, m - 1, d));
  if (date.getUTCFullYear() !== y || date.getUTCMonth() !== m - 1 || date.getUTCDate() !== d) return false;
  if (v.length === 14) {
    const hh = Number(v.slice(8, 10));
    const mm = Number(v.slice(10, 12));
    const ss = Number(v.slice(12, 14));
    return hh < 24 && mm < 60 && ss < 60;
  }
  return true;
}

/**
 * STRING record ids are safe as parts of storage keys and paths (issue 8): letters, digits, `-`,
 * `_` and `.`, never `..`. INTEGER ids in paths are canonical decimal (`1`, not `01` or `+1`).
 */
export const SAFE_STRING_ID = /^[A-Za-z0-9_.-]+$/;
export const CANONICAL_INTEGER = /^(?:0|-?[1-9]\d{0,15})$/;

export function safeStringId(s: string): boolean {
  return SAFE_STRING_ID.test(s) && !s.includes("..");
}

export const DEFAULT_STRING_LENGTH = 255;
export const DEFAULT_DECIMAL_PRECISION = 18;
export const DEFAULT_DECIMALS = 2;

/** The audit fields each AUDIT_STYLE adds to a dimension table, with their types. */
export const AUDIT_FIELDS: Record<
  AuditStyle,
  ReadonlyArray<{ code: string; type: DataType; length: number }>
> = {
  TREC: [
    { code: "TREC", type: "STRING", length: 1 },
    { code: "CDATA", type: "TIMESTAMP", length: 14 },
    { code: "OWNER", type: "STRING", length: 100 },
    { code: "LDATA", type: "TIMESTAMP", length: 14 },
    { code: "LOWNER", type: "STRING", length: 100 },
  ],
  CREATED: [
    { code: "TREC", type: "STRING", length: 1 },
    { code: "CREATED_BY", type: "STRING", length: 100 },
    { code: "CREATED_AT", type: "TIMESTAMP", length: 14 },
    { code: "UPDATED_BY", type: "STRING", length: 100 },
    { code: "UPDATED_AT", type: "TIMESTAMP", length: 14 },
    { code: "DELETED_BY", type: "STRING", length: 100 },
    { code: "DELETED_AT", type: "TIMESTAMP", length: 14 },
  ],
};

export const TENANT_COLUMN = "TENANT_ID";

/** Column names a TB_VAR row may not use: they belong to the system. */
export const RESERVED_COLUMNS: ReadonlySet<string> = new Set([
  TENANT_COLUMN,
  ...AUDIT_FIELDS.TREC.map((f) => f.code),
  ...AUDIT_FIELDS.CREATED.map((f) => f.code),
]);

/**
 * Tables of the service itself: a TB_DIM may not claim them (compared case-insensitively). Every
 * table the migrations create is here (test/write/reserved-names.test.ts checks it).
 */
export const FIXED_TABLES: ReadonlySet<string> = new Set([
  "TB_DIM",
  "TB_VAR",
  "TB_COST",
  "TB_OBJECT",
  "TB_MENU",
  "TB_SORT",
  "TB_DOCUMENT",
  "TB_META_STATE",
  "TB_TENANT",
  "TB_USER",
  "TB_USER_GRANT",
  "TB_LOGIN_FAILURE",
  "TB_ANAG_SESSIONS00",
  "TB_REFRESH_TOKEN",
  "TB_ANAG_OUTBOX00",
  "TB_WEBHOOK",
  "TB_WEBHOOK_LOG",
  "TB_SEQUENCE",
  "TB_IMPORT_LEDGER",
  "TB_EVENT_CONSUMED",
  "TB_EVENT_STATS",
  "TB_SEARCH",
  "TB_SEARCH_FIELDS",
  "TB_HISTORY",
  "TB_WEBHOOK_DELIVERY",
  "_dimensio_migrations",
]);

/**
 * PostgreSQL's system columns: every table has them, so no declared column may be named so
 * (CREATE TABLE fails). Names are compared as PostgreSQL compares quoted identifiers: exactly.
 */
export const SYSTEM_COLUMNS: ReadonlySet<string> = new Set([
  "tableoid",
  "xmin",
  "cmin",
  "xmax",
  "cmax",
  "ctid",
  "oid",
]);

/** Dimension codes that name metadata endpoints rather than data dimensions. */
export const METADATA_DIMENSIONS: ReadonlySet<string> = new Set([
  "DIM",
  "VAR",
  "COST",
  "OBJECT",
  "MENU",
  "SORT",
  "DOCUMENT",
]);
