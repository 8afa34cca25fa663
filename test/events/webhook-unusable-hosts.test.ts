// A webhook whose host name gives no address the service may call (exploratory test "security",
// finding 3): a name that resolves to a loopback or private address, or that does not resolve.
// The tenant's delivery log says so in words that do not tell the two apart ("host not found or
// address not allowed": a tenant could otherwise learn which internal names exist), apart from a
// host that refuses the connection ("connection failed"); the operator's log names the address and
// its range. Such an attempt is retried as any failure is (a name can come to resolve elsewhere).
import type dns from "node:dns";
import net from "node:net";
import { describe, expect, it } from "vitest";
import { DELIVERY_ERRORS, sendAttempt } from "../../src/events/webhooks/send.ts";
import { freePort } from "../helpers/process.ts";
import { webhookReceiver } from "./support.ts";
import { deliveryLogWith, webhookSuite } from "./webhook-setup.ts";

/** A resolver that answers `address` for every name (the test's own names, no DNS asked). */
function resolvingTo(address: string) {
  return (
    _hostname: string,
    _options: dns.LookupAllOptions,
    callback: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void,
  ) => callback(null, [{ address, family: net.isIP(address) }]);
}

const attempt = (url: string, address: string, allowPrivate = false) =>
  sendAttempt({
    url,
    body: "{}",
    secret: null,
    eventId: "1",
    eventType: "CITYCreated",
    timestamp: "2026-11-25T10:00:00Z",
    timeoutMs: 5000,
    allowPrivate,
    resolve: resolvingTo(address),
  });

describe("an attempt to a name that resolves to a refused address", () => {
  it("reads 'host not found or address not allowed'; the operator's detail names the address and its range", async () => {
    const receiver = await webhookReceiver();
    try {
      const url = `http://hooks.acme.example:${receiver.port}/hook`;
      for (const [address, kind] of [
        ["127.0.0.1", "loopback"],
        ["::1", "loopback"],
        ["::ffff:127.0.0.1", "loopback"],
        ["10.0.0.5", "private"],
        ["192.168.1.20", "private"],
        ["fd00::7", "private"],
        ["169.254.169.254", "link-local"],
        ["192.0.2.1", "non-public"],
      ] as const) {
        const result = await attempt(url, address);
        expect(result, address).toEqual({
          ok: false,
          httpStatus: null,
          error: DELIVERY_ERRORS.unusableHost,
          detail: `hooks.acme.example resolves to ${address}, a ${kind} address, which webhooks may not reach (WEBHOOK_ALLOW_PRIVATE is off)`,
        });
      }
      expect(DELIVERY_ERRORS.unusableHost).toBe("host not found or address not allowed");
      expect(receiver.requests).toHaveLength(0);
    } finally {
      await receiver.close();
    }
  });

  it("a host that resolves to an allowed address and refuses the connection still reads 'connection failed'", async () => {
    const port = await freePort();
    const result = await attempt(`http://hooks.acme.example:${port}/hook`, "127.0.0.1", true);
    expect(result.error).toBe(DELIVERY_ERRORS.connection);
  });
});

describe("the delivery log of a registration whose name gives no usable address (WEBHOOK_ALLOW_PRIVATE unset)", () => {
  const suite = webhookSuite("pglite", {
    users: ["anna"],
    allowPrivate: false,
    env: { WEBHOOK_RETRY_BASE_MS: "10" },
  });
  const { anna } = suite.clients;

  it("each attempt reads 'host not found or address not allowed', and it is retried until its retries end", async () => {
    // `.test` is reserved (RFC 6761): the name never resolves, which the log reads as it reads a
    // name resolving to loopback (the same text, above), with no DNS error or address.
    const hook = await suite.register(anna, {
      url: "http://hooks.acme.test:8080/hook",
      events: ["CITYCreated"],
      retry_count: 1,
    });
    await suite.createCity(anna);
    const rows = (await deliveryLogWith(anna, hook, 2)).sort((a, b) => Number(a.LOG_ID) - Number(b.LOG_ID));
    expect(rows.map((r) => [r.STATUS, r.HTTP_STATUS, r.ERROR_MESSAGE])).toEqual([
      ["retrying", null, "host not found or address not allowed"],
      ["failed", null, "host not found or address not allowed"],
    ]);
    expect(JSON.stringify(rows)).not.toMatch(/ENOTFOUND|EAI_|getaddrinfo/);
  });
});
