// The bundled demo data set (a coffee roastery and a bakery), loaded when `npm start` finds an
// empty database.
import path from "node:path";
import { importFixture, readFixtureFile } from "../fixtures/import.ts";
import { projectRoot } from "../paths.ts";
import type { Services } from "../services.ts";

export const DEMO_FIXTURE_PATH = path.join(projectRoot(), "src/demo/demo-fixture.json");

interface DemoLogin {
  user_id: string;
  password: string;
  tenant_id: string;
  peso: string;
}

/** Loads the demo fixture into an empty database; returns its logins, or null when not empty. */
export async function loadDemoDataIfEmpty(services: Services): Promise<DemoLogin[] | null> {
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
