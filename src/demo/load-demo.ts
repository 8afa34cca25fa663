// The bundled demo data set (a coffee roastery and a bakery), loaded when `npm start` finds an
// empty database.
import path from "node:path";
import { importFixture, readFixtureFile } from "../fixtures/import.ts";
import { projectRoot } from "../paths.ts";
import type { Services } from "../services.ts";

export const DEMO_FIXTURE_PATH = path.join(projectRoot(), "src/demo/demo-fixture.json");

export interface DemoLogin {
  user_id: string;
  password: string;
  tenant_id: string;
  peso: string;
}

/** The advisory lock under which one process at a time looks and loads (arbitrary, constant). */
const DEMO_LOCK = 724_461_004;

/**
 * Loads the demo fixture into an empty database; returns its logins, or null when not empty. On
 * PostgreSQL the look and the load hold an advisory lock: processes started together on an empty
 * database (the separate roles of README's "Separate processes") load it once, the others then
 * find it loaded (and print no logins).
 */
export async function loadDemoDataIfEmpty(services: Services): Promise<DemoLogin[] | null> {
  if (services.db.kind !== "postgres") return loadIfEmpty(services);
  return services.db.transaction(async (tx) => {
    await tx.query("SELECT pg_advisory_xact_lock($1)", [DEMO_LOCK]);
    return loadIfEmpty(services);
  });
}

async function loadIfEmpty(services: Services): Promise<DemoLogin[] | null> {
  const [dims, users] = await Promise.all([services.prisma.tbDim.count(), services.prisma.tbUser.count()]);
  if (dims > 0 || users > 0) return null;
  const fixture = (await readFixtureFile(DEMO_FIXTURE_PATH)) as { users: DemoLogin[] };
  await importFixture(services, fixture);
  return fixture.users.map(({ user_id, password, tenant_id, peso }) => ({
    user_id,
    password,
    tenant_id,
    peso,
  }));
}

/**
 * The start-up banner of a first load: every demo login of the fixture (README's demo users
 * table lists the same), one a line.
 */
export function demoLoginsBanner(logins: readonly DemoLogin[]): string {
  const lines = logins.map(
    (l) => `  ${l.user_id.padEnd(8)} ${l.password.padEnd(16)} tenant ${l.tenant_id}, peso ${l.peso}`,
  );
  return ["", "Demo data loaded. Log in with POST /auth/login {username, password}:", ...lines, ""].join(
    "\n",
  );
}
