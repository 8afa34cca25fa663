// PostGraphile 5 over the bench's scratch database (bench/compare, issue 19): its Amber preset
// on the public schema behind node:http, a process of its own, no authentication.
//
//   node --import tsx bench/postgraphile.ts postgres://…   (prints POSTGRAPHILE_PORT=<port>)
//
// PostGraphile 5 needs Node 22 or later: run it with the project's Node (npx puts
// node_modules/.bin/node, Node 24, first on the PATH), not a system Node 20.
import http from "node:http";
import type { AddressInfo } from "node:net";
import { postgraphile } from "postgraphile";
import { makePgService } from "postgraphile/adaptors/pg";
import { grafserv } from "postgraphile/grafserv/node";
import { PostGraphileAmberPreset } from "postgraphile/presets/amber";

async function run(url: string) {
  const pgl = postgraphile({
    extends: [PostGraphileAmberPreset],
    pgServices: [makePgService({ connectionString: url, schemas: ["public"], poolConfig: { max: 10 } })],
    grafserv: { graphiql: false, watch: false },
    grafast: { explain: false },
  });
  const serv = pgl.createServ(grafserv);
  const server = http.createServer();
  serv.addTo(server);
  await serv.ready();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  console.log(`POSTGRAPHILE_PORT=${(server.address() as AddressInfo).port}`);
  process.on("SIGTERM", () =>
    server.close(async () => {
      await pgl.release();
      process.exit(0);
    }),
  );
}

run(process.argv[2]!).catch((err) => {
  console.error(err);
  process.exit(1);
});
