// The floors of bench/compare: the workloads' SQL through a bare `pg` pool behind node:http, JSON
// out, no framework; a process of its own that loads nothing else. /w1../w5: the same SQL as
// Dimensio (tenant, TREC rule, total, outbox row; issue 11). /p1../p5: the page-only floor of
// issue 19 (one parameterised statement, the page only).
//
//   node --import tsx bench/floor.ts postgres://…   (prints FLOOR_PORT=<port>)
import http from "node:http";
import type { AddressInfo } from "node:net";
import pg from "pg";

const CUST_COLUMNS = `"CUST_ID", "CODE", "NAME", "CITY_ID", "EMAIL", "CREDIT_LIMIT", "VIP", "NOTES", "SALES_REP", "TREC", "CDATA", "OWNER", "LDATA", "LOWNER"`;
const ORD_COLUMNS = `o."ORD_ID", o."ORD_NO", o."CUST_ID", o."ORD_DATE", o."STATUS", o."TOTAL", o."CREATED_IN", o."TREC", o."CDATA", o."OWNER", o."LDATA", o."LOWNER"`;

/** The floor: the same SQL through a bare pg pool, JSON out, no framework. */
export function floorServer(pool: pg.Pool): http.Server {
  const json = (res: http.ServerResponse, status: number, body: unknown) => {
    const text = JSON.stringify(body);
    res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
    res.end(text);
  };
  return http.createServer(async (req, res) => {
    const url = new URL(req.url!, "http://x");
    try {
      switch (url.pathname) {
        case "/w1": {
          // The page and its total: two statements, as Dimensio (and PostgREST) run them.
          const city = url.searchParams.get("city");
          const [page, total] = await Promise.all([
            pool.query(
              `SELECT ${CUST_COLUMNS} FROM "TB_ANAG_CUST00"
                WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' AND "CITY_ID" = $1 ORDER BY "NAME" LIMIT 20`,
              [city],
            ),
            pool.query(
              `SELECT count(*)::int AS n FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' AND "CITY_ID" = $1`,
              [city],
            ),
          ]);
          return json(res, 200, { data: page.rows, meta: { total: total.rows[0].n } });
        }
        case "/w2": {
          const { rows } = await pool.query(
            `SELECT ${CUST_COLUMNS} FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "CUST_ID" = $1`,
            [Number(url.searchParams.get("id"))],
          );
          return json(res, rows.length ? 200 : 404, { data: rows[0] ?? null });
        }
        case "/w3": {
          const { rows } = await pool.query(
            `SELECT ${ORD_COLUMNS}, row_to_json(c) AS "CUST"
               FROM "TB_DOC_ORD00" o
               LEFT JOIN LATERAL (SELECT "CUST_ID", "CODE", "NAME", "CITY_ID" FROM "TB_ANAG_CUST00" c
                                   WHERE c."TENANT_ID" = o."TENANT_ID" AND c."CUST_ID" = o."CUST_ID") c ON true
              WHERE o."TENANT_ID" = 'acme' AND o."TREC" <> 'C' ORDER BY o."ORD_ID" DESC LIMIT 20`,
          );
          return json(res, 200, { data: rows });
        }
        case "/w4": {
          let body = "";
          for await (const chunk of req) body += chunk;
          // The row as the client sent it (NAME and CODE): no counter, no outbox row.
          const data = JSON.parse(body).data as { NAME: string; CODE: string };
          const { rows } = await pool.query(
            `INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "TREC", "CDATA", "OWNER", "TENANT_ID")
             VALUES ($1, $2, 'N', to_char(now(), 'YYYYMMDDHH24MISS'), 'floor', 'acme')
             RETURNING ${CUST_COLUMNS}`,
            [data.NAME, data.CODE],
          );
          return json(res, 201, { data: rows[0] });
        }
        case "/w4o": {
          // The same row with its outbox row, in one statement (a transaction of its own): what
          // the contract asks of every write, as an expert would hand-write it. The outbox row goes
          // to floor_outbox (TB_ANAG_OUTBOX00's copy): Dimensio's relay is not to publish it.
          let body = "";
          for await (const chunk of req) body += chunk;
          const data = JSON.parse(body).data as { NAME: string; CODE: string };
          const { rows } = await pool.query(
            `WITH c AS (
               INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "TREC", "CDATA", "OWNER", "TENANT_ID")
               VALUES ($1, $2, 'N', to_char(now(), 'YYYYMMDDHH24MISS'), 'floor', 'acme')
               RETURNING ${CUST_COLUMNS}),
             o AS (
               INSERT INTO floor_outbox ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT")
               SELECT 'CUST.Created', 'CUST', c."CUST_ID"::text, to_jsonb(c), 'acme', now() FROM c
               RETURNING "OUTBOX_ID")
             SELECT c.* FROM c, o`,
            [data.NAME, data.CODE],
          );
          return json(res, 201, { data: rows[0] });
        }
        case "/w4s": {
          // The same work as Dimensio's create, as an expert would hand-write it in one statement:
          // the tenant's gap-free counter for the CODE, the row, and its outbox row with NOTIFY.
          let body = "";
          for await (const chunk of req) body += chunk;
          const data = JSON.parse(body).data as { NAME: string };
          const { rows } = await pool.query(
            `WITH s AS (
               INSERT INTO "TB_SEQUENCE" ("TENANT_ID", "SEQ_NAME", "VALUE") VALUES ('acme', 'CUST', 1)
               ON CONFLICT ("TENANT_ID", "SEQ_NAME") DO UPDATE SET "VALUE" = "TB_SEQUENCE"."VALUE" + 1
               RETURNING "VALUE"),
             c AS (
               INSERT INTO "TB_ANAG_CUST00" ("NAME", "CODE", "TREC", "CDATA", "OWNER", "TENANT_ID")
               SELECT $1, 'C-' || lpad(s."VALUE"::text, 5, '0'), 'N', to_char(now(), 'YYYYMMDDHH24MISS'), 'floor', 'acme'
                 FROM s
               RETURNING ${CUST_COLUMNS}),
             o AS (
               INSERT INTO floor_outbox ("EVENT_TYPE", "AGGREGATE_TYPE", "AGGREGATE_ID", "PAYLOAD", "TENANT_ID", "CREATED_AT")
               SELECT 'CUST.Created', 'CUST', c."CUST_ID"::text, to_jsonb(c), 'acme', now() FROM c
               RETURNING "OUTBOX_ID")
             SELECT c.*, pg_notify('floor_outbox', '') FROM c, o`,
            [data.NAME],
          );
          return json(res, 201, { data: rows[0] });
        }
        case "/w5": {
          const { rows } = await pool.query(
            `SELECT count(*)::int AS n FROM "TB_ANAG_CUST00" WHERE "TENANT_ID" = 'acme' AND "TREC" <> 'C' AND "CITY_ID" = $1`,
            [url.searchParams.get("city")],
          );
          return json(res, 200, { count: rows[0].n });
        }
        // The page-only floor (issue 19): one parameterised statement per request, the page
        // only, on tables without a tenant column (floor_cust, floor_ord: bench/compare copies the
        // tenant's rows into them, with the same indexes less the tenant column): no TREC rule,
        // no total, no outbox row.
        case "/p1": {
          const { rows } = await pool.query(
            `SELECT ${CUST_COLUMNS} FROM floor_cust WHERE "CITY_ID" = $1 ORDER BY "NAME" LIMIT 20`,
            [url.searchParams.get("city")],
          );
          return json(res, 200, { data: rows });
        }
        case "/p2": {
          const { rows } = await pool.query(`SELECT ${CUST_COLUMNS} FROM floor_cust WHERE "CUST_ID" = $1`, [
            Number(url.searchParams.get("id")),
          ]);
          return json(res, rows.length ? 200 : 404, { data: rows[0] ?? null });
        }
        case "/p3": {
          const { rows } = await pool.query(
            `SELECT ${ORD_COLUMNS}, row_to_json(c) AS "CUST"
               FROM floor_ord o
               LEFT JOIN LATERAL (SELECT "CUST_ID", "CODE", "NAME", "CITY_ID" FROM floor_cust c
                                   WHERE c."CUST_ID" = o."CUST_ID") c ON true
              ORDER BY o."ORD_ID" DESC LIMIT $1`,
            [20],
          );
          return json(res, 200, { data: rows });
        }
        case "/p4": {
          let body = "";
          for await (const chunk of req) body += chunk;
          // The row only (its NOT NULL columns given): no counter, no outbox row.
          const data = JSON.parse(body).data as { NAME: string; CODE: string };
          const { rows } = await pool.query(
            `INSERT INTO floor_cust ("NAME", "CODE", "TREC", "CDATA", "OWNER")
             VALUES ($1, $2, 'N', '20260101000000', 'floor') RETURNING ${CUST_COLUMNS}`,
            [data.NAME, data.CODE],
          );
          return json(res, 201, { data: rows[0] });
        }
        case "/p5": {
          const { rows } = await pool.query(
            `SELECT count(*)::int AS n FROM floor_cust WHERE "CITY_ID" = $1`,
            [url.searchParams.get("city")],
          );
          return json(res, 200, { count: rows[0].n });
        }
        default:
          return json(res, 404, {});
      }
    } catch (err) {
      return json(res, 500, { error: String(err) });
    }
  });
}

/** The floor on a free loopback port; prints it. */
async function runFloor(url: string) {
  const pool = new pg.Pool({ connectionString: url, max: 10 });
  const server = floorServer(pool);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  console.log(`FLOOR_PORT=${(server.address() as AddressInfo).port}`);
  process.on("SIGTERM", () => server.close(() => pool.end().then(() => process.exit(0))));
}

runFloor(process.argv[2]!).catch((err) => {
  console.error(err);
  process.exit(1);
});
