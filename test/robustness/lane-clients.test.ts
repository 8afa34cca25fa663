// Who waits in a tenant's heavy lane (src/http/heavy-requests.ts): a LaneClient, whatever carries
// the request. An HTTP request's client is its response's (one per response, `gone` aborted when
// the response closes); a WebSocket operation's is its own AbortController's. A client that goes
// away while waiting leaves the queue, and a request holding a turn never waits for itself.
import { once } from "node:events";
import http, { type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { createHeavyRequests, httpLaneClient, type LaneClient } from "../../src/http/heavy-requests.ts";

const lanes = () => createHeavyRequests({ thresholdValues: 10, perTenant: 1, maxWaiting: 5 });

describe("lane clients", () => {
  it("a waiting client whose signal aborts leaves the queue; the next one gets the turn", async () => {
    const heavy = lanes();
    const first: LaneClient = { gone: new AbortController().signal };
    const leaving = new AbortController();
    const second: LaneClient = { gone: leaving.signal };
    const third: LaneClient = { gone: new AbortController().signal };
    const leaveFirst = await heavy.enter("acme", 100, first);
    const secondTurn = heavy.enter("acme", 100, second);
    let thirdIn = false;
    const thirdTurn = heavy.enter("acme", 100, third).then((leave) => {
      thirdIn = true;
      return leave;
    });
    expect(heavy.state("acme")).toEqual({ running: 1, waiting: 2 });
    leaving.abort(new Error("the operation ended"));
    await expect(secondTurn).rejects.toThrow("the operation ended");
    expect(heavy.state("acme")).toEqual({ running: 1, waiting: 1 });
    leaveFirst();
    const leaveThird = await thirdTurn;
    expect(thirdIn).toBe(true);
    expect(heavy.state("acme")).toEqual({ running: 1, waiting: 0 });
    leaveThird();
    expect(heavy.state("acme")).toEqual({ running: 0, waiting: 0 });
  });

  it("a client holding a turn does not wait for itself; cheap work never enters a lane", async () => {
    const heavy = lanes();
    const client: LaneClient = { gone: new AbortController().signal };
    const leave = await heavy.enter("acme", 100, client);
    expect(heavy.waits(100, client)).toBe(false);
    expect(
      await heavy.run(
        "acme",
        100,
        () => client,
        async () => heavy.state("acme"),
      ),
    ).toEqual({
      running: 1,
      waiting: 0,
    });
    leave();
    expect(heavy.waits(100, client)).toBe(true);
    expect(heavy.waits(9, client)).toBe(false);
    // A cheap request runs at once and never asks for its lane client (none is made for it).
    expect(heavy.isHeavy(9)).toBe(false);
    let asked = 0;
    const clientOf = () => {
      asked++;
      return client;
    };
    expect(await heavy.run("acme", 9, clientOf, async () => "ran")).toBe("ran");
    expect(asked).toBe(0);
    expect(await heavy.run("acme", 100, clientOf, async () => "ran")).toBe("ran");
    expect(asked).toBe(1);
  });

  it("an HTTP request's client is one per response, and its signal aborts when the client goes away", async () => {
    const responses: ServerResponse[] = [];
    const arrived = new EventTarget();
    const server = http.createServer((_req, res) => {
      responses.push(res);
      arrived.dispatchEvent(new Event("request"));
    });
    server.listen(0, "127.0.0.1");
    await once(server, "listening");
    try {
      const { port } = server.address() as AddressInfo;
      const request = http.get({ host: "127.0.0.1", port, path: "/", agent: false });
      request.on("error", () => {});
      await once(arrived, "request");
      const res = responses[0]!;
      const client = httpLaneClient(res);
      expect(httpLaneClient(res)).toBe(client);
      const { gone } = client;
      expect(client.gone).toBe(gone);
      expect(gone.aborted).toBe(false);
      // A turn's waiter whose client goes away leaves the queue.
      const heavy = lanes();
      const holder: LaneClient = { gone: new AbortController().signal };
      const leave = await heavy.enter("acme", 100, holder);
      const waiting = heavy.enter("acme", 100, client);
      request.destroy();
      await expect(waiting).rejects.toThrow("the client closed the connection while waiting");
      expect(gone.aborted).toBe(true);
      expect(heavy.state("acme")).toEqual({ running: 1, waiting: 0 });
      leave();
    } finally {
      server.close();
    }
  });
});
