// Which addresses a webhook may reach. Private, loopback, link-local, documentation (TEST-NET) and
// other non-public ranges are refused unless WEBHOOK_ALLOW_PRIVATE=true, and so are the IPv6 forms
// that carry an IPv4 address (IPv4-mapped, -translated and -compatible, 6to4) when that address is
// refused, NAT64 and Teredo (their far end is an IPv4 address the service cannot judge), and the
// localhost names. The check runs at registration on a literal address or name, and at delivery
// time on the addresses the host name resolves to; the connection uses the address that was
// checked (no DNS rebinding between the check and the connection).
import dns from "node:dns";
import net from "node:net";

const blocked = new net.BlockList();
for (const [address, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24], // TEST-NET-1
  ["192.88.99.0", 24], // 6to4 relay anycast
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24], // TEST-NET-2
  ["203.0.113.0", 24], // TEST-NET-3
  ["224.0.0.0", 3],
] as const) {
  blocked.addSubnet(address, prefix, "ipv4");
}
for (const [address, prefix] of [
  ["::", 96], // unspecified, loopback and the deprecated IPv4-compatible ::a.b.c.d
  ["64:ff9b::", 96], // NAT64, well-known prefix
  ["64:ff9b:1::", 48], // NAT64, local use
  ["100::", 64], // discard-only
  ["2001::", 23], // IETF protocol assignments: Teredo (2001::/32), benchmarking, ORCHID
  ["2001:db8::", 32], // documentation
  ["3fff::", 20], // documentation
  ["5f00::", 16], // SRv6 SIDs
  ["fc00::", 7],
  ["fe80::", 10],
  ["fec0::", 10], // site-local (deprecated)
  ["ff00::", 8],
] as const) {
  blocked.addSubnet(address, prefix, "ipv6");
}

/** The eight 16-bit groups of an IPv6 address that net.isIP accepts (zone removed); null if not. */
function ipv6Groups(address: string): number[] | null {
  let text = address;
  const tail: number[] = [];
  const dotted = /^(.*:)(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(2).map(Number) as [number, number, number, number];
    tail.push((a << 8) | b, (c << 8) | d);
    text = dotted[1]!.endsWith("::") ? dotted[1]! : dotted[1]!.slice(0, -1);
  }
  const halves = text.split("::");
  if (halves.length > 2) return null;
  const groups = (part: string) => (part === "" ? [] : part.split(":").map((g) => Number.parseInt(g, 16)));
  const left = groups(halves[0]!);
  const right = [...(halves.length === 2 ? groups(halves[1]!) : []), ...tail];
  const fill = halves.length === 2 ? 8 - left.length - right.length : 0;
  const all = [...left, ...new Array<number>(Math.max(0, fill)).fill(0), ...right];
  return all.length === 8 && all.every((g) => Number.isInteger(g) && g >= 0 && g <= 0xffff) ? all : null;
}

/** The IPv4 address an IPv6 address carries (mapped, translated, 6to4), or null. */
function embeddedIPv4(groups: number[]): string | null {
  const v4 = (hi: number, lo: number) => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  const zero = (from: number, to: number) => groups.slice(from, to).every((g) => g === 0);
  // ::ffff:a.b.c.d (IPv4-mapped) and ::ffff:0:a.b.c.d (IPv4-translated, SIIT)
  if (zero(0, 5) && groups[5] === 0xffff) return v4(groups[6]!, groups[7]!);
  if (zero(0, 4) && groups[4] === 0xffff && groups[5] === 0) return v4(groups[6]!, groups[7]!);
  // 2002:AABB:CCDD::/48 (6to4)
  if (groups[0] === 0x2002) return v4(groups[1]!, groups[2]!);
  return null;
}

/** True for an address outside the public internet (an IPv4 address inside IPv6 judged as IPv4). */
export function isPrivateAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return blocked.check(address, "ipv4");
  if (family !== 6) return true;
  const bare = address.replace(/%.*$/, "");
  const groups = ipv6Groups(bare);
  if (!groups) return true;
  const inner = embeddedIPv4(groups);
  if (inner !== null && blocked.check(inner, "ipv4")) return true;
  const canonical = groups.map((g) => g.toString(16)).join(":");
  return blocked.check(canonical, "ipv6");
}

/** Names that always mean this machine (RFC 6761 localhost, and the common /etc/hosts aliases). */
const LOCAL_NAMES = new Set(["localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"]);

/**
 * True when a URL's host (as `new URL().hostname` gives it, brackets allowed) may not be called:
 * a refused literal address or a localhost name. Other names are judged on what they resolve to.
 */
export function isRefusedHost(hostname: string): boolean {
  const host = hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (net.isIP(host)) return isPrivateAddress(host);
  const name = host.replace(/\.+$/, "");
  return name === "" || LOCAL_NAMES.has(name) || name.endsWith(".localhost");
}

/** A name resolved to an address webhooks may not reach (the message names it, for the operator). */
export class AddressNotAllowedError extends Error {}

/** What getaddrinfo answers for a name it cannot resolve (now or at all). */
const UNRESOLVED_CODES = new Set([
  "ENOTFOUND",
  "EAI_AGAIN",
  "EAI_NONAME",
  "EAI_NODATA",
  "EAI_FAIL",
  "ENODATA",
]);

/**
 * Whether a request error means the URL's host name gave no address the service may call: it did
 * not resolve, or it resolved to a refused address. The delivery log tells these apart from a
 * refused connection, but not from each other (a tenant could otherwise map the internal names).
 */
export function isUnusableHostError(err: Error): boolean {
  return (
    err instanceof AddressNotAllowedError || UNRESOLVED_CODES.has(String((err as NodeJS.ErrnoException).code))
  );
}

/** The kind of range a refused address is in, for the operator's log. */
function refusedKind(address: string): string {
  const bare = address.replace(/%.*$/, "");
  const groups = net.isIP(bare) === 6 ? ipv6Groups(bare) : null;
  const v4 = groups ? (embeddedIPv4(groups) ?? null) : net.isIP(bare) === 4 ? bare : null;
  if (v4 !== null) {
    if (v4.startsWith("127.")) return "loopback";
    if (/^(10\.|192\.168\.|172\.(1[6-9]|2\d|3[01])\.)/.test(v4)) return "private";
    if (v4.startsWith("169.254.")) return "link-local";
  } else if (groups?.slice(0, 7).every((g) => g === 0) && groups[7] === 1) return "loopback";
  else if (groups && (groups[0]! & 0xfe00) === 0xfc00) return "private";
  else if (groups && (groups[0]! & 0xffc0) === 0xfe80) return "link-local";
  return "non-public";
}

type LookupCallback = (
  err: NodeJS.ErrnoException | null,
  address: string | dns.LookupAddress[],
  family?: number,
) => void;

/** How a name is resolved (dns.lookup; replaceable, e.g. for a test's own names). */
export type Resolve = (
  hostname: string,
  options: dns.LookupAllOptions,
  callback: (err: NodeJS.ErrnoException | null, addresses: dns.LookupAddress[]) => void,
) => void;

/**
 * A `lookup` for http.request: resolves the name and refuses it when any address it resolves to
 * is private (unless allowed); the socket then connects to the address checked here.
 */
export function guardedLookup(allowPrivate: boolean, resolve: Resolve = dns.lookup) {
  return (hostname: string, options: dns.LookupOptions, callback: LookupCallback): void => {
    resolve(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, "");
      const list = addresses as dns.LookupAddress[];
      const refused = allowPrivate ? undefined : list.find((a) => isPrivateAddress(a.address));
      if (refused) {
        return callback(
          new AddressNotAllowedError(
            `${hostname} resolves to ${refused.address}, a ${refusedKind(refused.address)} address, which webhooks may not reach (WEBHOOK_ALLOW_PRIVATE is off)`,
          ),
          "",
        );
      }
      if (options.all) return callback(null, list);
      const first = list[0];
      if (!first)
        return callback(Object.assign(new Error(`${hostname} has no address`), { code: "ENODATA" }), "");
      callback(null, first.address, first.family);
    });
  };
}
