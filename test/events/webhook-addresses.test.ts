// The webhook address filter (issue 18 §4, docs/decisions.md "Webhook addresses and delivery log"):
// private and loopback addresses, TEST-NET, NAT64, 6to4, Teredo, IPv4-mapped/-translated/-compatible
// IPv6 forms of refused IPv4 addresses and localhost names are refused at registration (400 naming
// `url`) and at delivery time (a registration stored before, or a name that later points at
// loopback), also when a name resolves to them; the delivery log the tenant reads says "address
// not allowed", "host not found or address not allowed" or "connection failed", never the resolved
// address, a DNS error or a port.
import type dns from "node:dns";
import net from "node:net";
import { describe, expect, it } from "vitest";
import { isPrivateAddress, isRefusedHost } from "../../src/events/webhooks/addresses.ts";
import { freePort } from "../helpers/process.ts";
import { DELIVERY_ERRORS, sendAttempt } from "../../src/events/webhooks/send.ts";
import { webhookReceiver } from "./support.ts";
import { deliveryLogWith, webhookSuite } from "./webhook-setup.ts";

/** Addresses the filter refuses, IPv4 and the IPv6 forms that reach them. */
const REFUSED = [
  "192.0.2.10", // TEST-NET-1
  "198.51.100.7", // TEST-NET-2
  "203.0.113.200", // TEST-NET-3
  "10.1.2.3",
  "127.0.0.1",
  "169.254.169.254",
  "::ffff:127.0.0.1", // IPv4-mapped, dotted
  "::ffff:a9fe:a9fe", // IPv4-mapped 169.254.169.254, hex
  "::ffff:0:a00:1", // IPv4-translated 10.0.0.1
  "::127.0.0.1", // IPv4-compatible
  "::c0a8:1", // IPv4-compatible 192.168.0.1, hex
  "64:ff9b::a00:1", // NAT64 well-known prefix
  "64:ff9b::808:808", // NAT64 of a public address: the far end is not the service's to judge
  "64:ff9b:1::1", // NAT64 local-use prefix
  "2002:a00:1::1", // 6to4 of 10.0.0.1
  "2002:7f00:1::", // 6to4 of 127.0.0.1
  "2002:c000:0201::1", // 6to4 of TEST-NET-1
  "2001:0:4136:e378:8000:63bf:3fff:fdd2", // Teredo
  "2001:db8::1", // documentation
  "::1",
  "::",
  "fe80::1%eth0",
  "fd12:3456::1",
];
const ALLOWED = ["8.8.8.8", "::ffff:8.8.8.8", "::ffff:808:808", "2002:808:808::1", "2606:4700::1111"];

describe("the webhook address filter", () => {
  it("refuses TEST-NET, NAT64, 6to4, Teredo and every IPv6 form of a refused IPv4 address", () => {
    for (const address of REFUSED) expect(isPrivateAddress(address), address).toBe(true);
    for (const address of ALLOWED) expect(isPrivateAddress(address), address).toBe(false);
  });

  it("refuses localhost names in any spelling, judges other names by what they resolve to", () => {
    for (const host of ["localhost", "LOCALHOST", "localhost.", "api.localhost", "localhost.localdomain"]) {
      expect(isRefusedHost(host), host).toBe(true);
    }
    expect(isRefusedHost("[::ffff:7f00:1]")).toBe(true);
    expect(isRefusedHost("hooks.example.com")).toBe(false);
    expect(isRefusedHost("localhost.example.com")).toBe(false);
    expect(isRefusedHost("[2606:4700::1111]")).toBe(false);
  });
});

/** A resolver that answers `address` for every name (or fails like getaddrinfo for none). */
function resolvingTo(address: string | null) {
  return (
    hostname: string,
    _options: dns.LookupAllOptions,
    callback: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void,
  ) => {
    if (address === null) {
      const err: NodeJS.ErrnoException = new Error(`getaddrinfo ENOTFOUND ${hostname}`);
      err.code = "ENOTFOUND";
      return callback(err, []);
    }
    callback(null, [{ address, family: net.isIP(address) }]);
  };
}

describe("a delivery to a name that resolves to a refused address", () => {
  const attempt = (url: string, resolve: ReturnType<typeof resolvingTo>, allowPrivate = false) =>
    sendAttempt({
      url,
      body: "{}",
      secret: null,
      eventId: "1",
      eventType: "CITYCreated",
      timestamp: "2026-11-25T10:00:00Z",
      timeoutMs: 5000,
      allowPrivate,
      resolve,
    });

  it("is refused after resolution with a text that names neither the address nor the port", async () => {
    const receiver = await webhookReceiver();
    try {
      const url = `http://hooks.internal.example:${receiver.port}/hook`;
      for (const address of ["127.0.0.1", "::ffff:127.0.0.1", "10.0.0.5", "192.0.2.1", "64:ff9b::a00:1"]) {
        const result = await attempt(url, resolvingTo(address));
        expect(result, address).toMatchObject({
          ok: false,
          httpStatus: null,
          error: "host not found or address not allowed",
        });
      }
      expect(receiver.requests).toHaveLength(0);
      // A name that does not resolve reads the same: the log cannot tell the two apart.
      expect((await attempt(url, resolvingTo(null))).error).toBe(DELIVERY_ERRORS.unusableHost);
      // The same name and resolver with WEBHOOK_ALLOW_PRIVATE: the receiver is reached.
      expect(await attempt(url, resolvingTo("127.0.0.1"), true)).toEqual({
        ok: true,
        httpStatus: 200,
        error: null,
      });
      expect(receiver.requests).toHaveLength(1);
    } finally {
      await receiver.close();
    }
  });

  it("keeps the system's own words for the operator's log (detail), apart from the tenant's text", async () => {
    // A port that was just free: nothing listens on it.
    const port = await freePort();
    const result = await attempt(`http://127.0.0.1:${port}/hook`, resolvingTo("127.0.0.1"), true);
    expect(result.error).toBe(DELIVERY_ERRORS.connection);
    expect(result.detail).toMatch(/^ECONNREFUSED: /);
  });

  it("a literal refused address or localhost name is refused before any connection", async () => {
    for (const url of ["http://[::ffff:7f00:1]:9/x", "http://[2002:a00:1::1]/x", "http://api.localhost/x"]) {
      expect((await attempt(url, resolvingTo("8.8.8.8"))).error, url).toBe("address not allowed");
    }
  });
});

describe("webhook registrations and delivery logs (WEBHOOK_ALLOW_PRIVATE unset)", () => {
  const suite = webhookSuite("pglite", {
    users: ["anna"],
    allowPrivate: false,
    env: { WEBHOOK_RETRY_BASE_MS: "10" },
  });
  const { anna } = suite.clients;

  it("refuses every refused address and localhost name at registration with 400 naming url", async () => {
    const urls = [
      ...REFUSED.filter((a) => !a.includes("%")).map((a) =>
        net.isIPv6(a) ? `http://[${a}]:8080/hook` : `http://${a}:8080/hook`,
      ),
      "http://LOCALHOST./hook",
      "http://api.localhost/hook",
      "http://localhost.localdomain/hook",
      "http://2130706433/hook", // 127.0.0.1 as one number
      "http://0xc0.0.2.1/hook", // 192.0.2.1
      // Without a port, or with a small one.
      "http://127.0.0.1:9/x",
      "http://localhost/x",
      "http://10.1.2.3/x",
      "http://[::1]/x",
      "http://169.254.169.254/",
    ];
    for (const url of urls) {
      const res = await anna.post("/api/v4/webhooks", { url, events: ["*"] });
      expect(res.status, url).toBe(400);
      expect(res.body, url).toMatchObject({ code: "INVALID_FIELD", field: "url" });
      expect(res.body.message).toMatch(/may not reach/);
    }
    for (const url of [
      "http://8.8.8.8/hook",
      "https://[2606:4700::1111]/hook",
      "https://hooks.example.com/x",
    ]) {
      const res = await anna.post("/api/v4/webhooks", { url, events: ["CITYUpdated"] });
      expect(res.status, url).toBe(201);
    }
  });

  it("a stored registration to a refused literal or a localhost name fails at delivery with a generic log text", async () => {
    const receiver = await suite.receiver();
    // As if stored before the filter was widened (the IPv4-mapped form of the receiver's
    // address), or to a public name later re-pointed at loopback (localhost).
    const rows = await Promise.all(
      [`http://[::ffff:127.0.0.1]:${receiver.port}/hook`, `http://localhost:${receiver.port}/hook`].map(
        (URL) =>
          suite.app.t.services.prisma.tbWebhook.create({
            data: { SOURCE: "acme", URL, EVENTS: ["CITYCreated"], RETRY_COUNT: 0 },
          }),
      ),
    );
    await suite.createCity(anna);
    for (const row of rows) {
      const log = await deliveryLogWith(anna, row.WEBHOOK_ID, 1);
      expect(log[0], row.URL).toMatchObject({
        STATUS: "failed",
        HTTP_STATUS: null,
        ERROR_MESSAGE: "address not allowed",
      });
    }
    expect(receiver.requests).toHaveLength(0);
  });
});

describe("delivery log texts (WEBHOOK_ALLOW_PRIVATE=true)", () => {
  const suite = webhookSuite("pglite", {
    users: ["anna"],
    allowPrivate: true,
    env: { WEBHOOK_RETRY_BASE_MS: "10" },
  });
  const { anna } = suite.clients;

  it("a closed port reads 'connection failed', without the system's error, address or port", async () => {
    // A port that was just free: nothing listens on it.
    const port = await freePort();

    const hook = await suite.register(anna, {
      url: `http://127.0.0.1:${port}/hook`,
      events: ["CITYCreated"],
      retry_count: 1,
    });
    await suite.createCity(anna);
    const rows = await deliveryLogWith(anna, hook, 2);
    for (const row of rows) {
      expect(row.ERROR_MESSAGE).toBe("connection failed");
      expect(JSON.stringify(row)).not.toMatch(/ECONN|127\.0\.0\.1|getaddrinfo/);
      expect(JSON.stringify(row)).not.toContain(String(port));
    }
  });
});
