// What PostgreSQL says about a session's plans (src/db/connection.ts's tests): its prepared
// statements' generic and custom plans so far (pg_prepared_statements is per session), and its
// plan_cache_mode.
import type { Queryable } from "../../src/types.ts";

export interface PlanCounts {
  generic: number;
  custom: number;
}

/** The plans of the session's prepared statements whose text is LIKE `like`, summed. */
export async function preparedPlans(q: Pick<Queryable, "query">, like: string): Promise<PlanCounts> {
  const { rows } = await q.query<{ generic: string; custom: string }>(
    `SELECT coalesce(sum(generic_plans), 0) AS generic, coalesce(sum(custom_plans), 0) AS custom
       FROM pg_prepared_statements WHERE statement LIKE $1`,
    [like],
  );
  return { generic: Number(rows[0]!.generic), custom: Number(rows[0]!.custom) };
}

/** The session's plan_cache_mode (a statement without parameters: it switches nothing). */
export async function planCacheMode(q: Pick<Queryable, "query">): Promise<string> {
  return (await q.query<{ plan_cache_mode: string }>("SHOW plan_cache_mode")).rows[0]!.plan_cache_mode;
}
