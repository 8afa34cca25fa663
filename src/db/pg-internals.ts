// The one module of the data layer that reaches into pg's private internals (issue 36): pg is
// pinned to an exact version in package.json, and test/db/pg-internals.test.ts fails when an
// upgrade changes what is used here. What it buys is measured in docs/architecture.md.
//
// A named (prepared) statement that asks for its row description once per connection (issue 19).
//
// pg sends Bind, Describe (portal), Execute and Sync for every execution of a prepared statement,
// and builds a row parser for each column of the RowDescription that answers the Describe. A
// named statement's result columns cannot change while it exists on its connection (PostgreSQL
// refuses to run it instead: "cached plan must not change result type"), so after its first
// execution on a connection the description and its parsers are kept for that connection and
// the next executions send Bind, Execute and Sync only. Everything else (the Parse of a statement
// new to the connection, errors, pipelining, read timeouts) stays pg's own Query.
//
// It relies on pg's Query internals (`_result`, its `_types`, `_parsers`, `_accumulateRows`,
// `_getRows`, the connection's `parsedStatements`, `bind`, `close`, `sync`, `utils.prepareValue`;
// pg 8.23.1), which test/db/pg-internals.test.ts and test/db/described-query.test.ts pin.
import pg from "pg";
import type { PlanMode } from "../types.ts";

/** pg's wire connection, as far as this module uses it. */
interface Connection {
  parsedStatements: Record<string, string | undefined>;
  bind(config: {
    portal: string;
    statement: string;
    values: unknown[];
    binary: boolean;
    valueMapper: unknown;
  }): void;
  close(config: { type: "S"; name: string }): void;
  sync(): void;
}

/** What a RowDescription gave pg's Result: kept per connection and statement name. */
interface Description {
  readonly fields: unknown[];
  readonly parsers: unknown[] | undefined;
  readonly empty: Record<string, null> | null;
}

/** pg's Result, as far as this module uses it. */
interface ResultInternals {
  _types: unknown;
  fields: unknown[];
  _parsers: unknown[] | undefined;
  _prebuiltEmptyResultObject: Record<string, null> | null;
}

/** pg's Query, as far as this module uses it. */
interface QueryInternals {
  name?: string;
  types: unknown;
  text: string;
  values?: unknown[];
  binary?: boolean;
  portal: string;
  rows?: number;
  _result: ResultInternals;
  _accumulateRows: boolean;
  _getRows(connection: Connection, rows: number | undefined): void;
  handleError(err: unknown, connection: Connection): void;
  prepare(connection: Connection): void;
  handleRowDescription(msg: { fields: unknown[] }): void;
}

const descriptions = new WeakMap<Connection, Map<string, Description>>();

// pg's `utils.prepareValue` (the value mapper its own Query binds with).
const prepareValue = (pg as unknown as { utils?: { prepareValue: unknown } }).utils?.prepareValue;

const BaseQuery = pg.Query as unknown as new (text: string, values: unknown[]) => QueryInternals;

/** What a query is made of: its SQL, parameters, type parsers and, prepared, its name. */
export interface DescribedQueryConfig {
  text: string;
  values: unknown[];
  types: unknown;
  name?: string | undefined;
  /** The plan it asks for (src/db/connection.ts); custom when not given. */
  plan?: PlanMode | undefined;
}

/**
 * A query for `client.query()` (pg's Submittable): a named statement whose row description, once
 * known on a connection, is not asked for again there. (An unnamed one is pg's Query as it is.)
 */
export class DescribedOnceQuery extends BaseQuery {
  /** The connection this query was sent on (its RowDescription is kept for it). */
  private sentOn: Connection | null = null;
  /** The plan it asks for (src/db/connection.ts). */
  readonly plan: PlanMode;

  constructor(config: DescribedQueryConfig) {
    // Given as text and values, pg's Query does not copy a config object property by property
    // (its cloneQueryConfig: 2.5 % of a GET by id's process CPU); the rest is set here.
    super(config.text, config.values);
    this.types = config.types;
    this._result._types = config.types;
    if (config.name !== undefined) this.name = config.name;
    this.plan = config.plan ?? "custom";
  }

  override prepare(connection: Connection): void {
    this.sentOn = connection;
    const name = this.name;
    const known =
      name !== undefined && connection.parsedStatements[name] === this.text
        ? descriptions.get(connection)?.get(name)
        : undefined;
    if (!known || !prepareValue) {
      super.prepare(connection);
      return;
    }
    try {
      connection.bind({
        portal: this.portal,
        statement: name!,
        values: this.values ?? [],
        binary: this.binary ?? false,
        valueMapper: prepareValue,
      });
    } catch (err) {
      // A value pg cannot send: as pg's own Query does.
      connection.close({ type: "S", name: name! });
      connection.sync();
      this.handleError(err, connection);
      return;
    }
    const result = this._result;
    result.fields = known.fields;
    result._parsers = known.parsers;
    result._prebuiltEmptyResultObject = known.empty;
    this._accumulateRows = true;
    this._getRows(connection, this.rows);
  }

  override handleRowDescription(msg: { fields: unknown[] }): void {
    super.handleRowDescription(msg);
    const connection = this.sentOn;
    if (!connection || this.name === undefined) return;
    let byName = descriptions.get(connection);
    if (!byName) {
      byName = new Map();
      descriptions.set(connection, byName);
    }
    const result = this._result;
    byName.set(this.name, {
      fields: result.fields,
      parsers: result._parsers,
      empty: result._prebuiltEmptyResultObject,
    });
  }
}
