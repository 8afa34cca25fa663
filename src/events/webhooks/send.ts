// One webhook attempt over HTTP (spec 6.1.2–6.1.3): POST of the exact body bytes with the four
// headers and the HMAC signature, bounded by the registration's TIMEOUT_MS, to an address checked
// at connection time.
import { createHmac } from "node:crypto";
import http from "node:http";
import https from "node:https";
import { guardedLookup, isRefusedHost, isUnusableHostError, type Resolve } from "./addresses.ts";

export interface Attempt {
  url: string;
  body: string;
  secret: string | null;
  eventId: string;
  eventType: string;
  timestamp: string;
  timeoutMs: number;
  allowPrivate: boolean;
  /** Name resolution (dns.lookup when absent). */
  resolve?: Resolve;
  /**
   * Keep-alive connections to reuse (the delivery worker's own); none: a connection per attempt.
   * A pooled connection passed the address check when it was opened, under the same
   * `allowPrivate` and `resolve` (a pool must not be shared across either).
   */
  agents?: AttemptAgents;
}

export interface AttemptAgents {
  http: http.Agent;
  https: https.Agent;
}

/** How long a kept connection may sit idle (less when the receiver's Keep-Alive hint says so). */
const IDLE_CONNECTION_MS = 4000;

/** Keep-alive agents for one delivery worker's attempts; `destroy` closes what they hold. */
export function attemptAgents(): AttemptAgents & { destroy(): void } {
  const options = { keepAlive: true, timeout: IDLE_CONNECTION_MS, scheduling: "lifo" as const };
  const agents = { http: new http.Agent(options), https: new https.Agent(options) };
  return {
    ...agents,
    destroy() {
      agents.http.destroy();
      agents.https.destroy();
    },
  };
}

export interface AttemptResult {
  ok: boolean;
  httpStatus: number | null;
  error: string | null;
  /** The system's own words for a failed connection (DNS, refused port, TLS): for the operator's
   * log only, never the tenant's delivery log. */
  detail?: string;
}

/** `sha256=` and the lower-case hex HMAC-SHA256 of the body, keyed with the secret. */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(body, "utf8").digest("hex")}`;
}

const USER_AGENT = "Dimensio-Webhooks/1";

/**
 * The texts a failed attempt leaves in the delivery log, which the tenant reads. They never carry
 * the system's own words (`getaddrinfo ENOTFOUND db.internal`, `connect ECONNREFUSED
 * 10.0.0.5:5432`). A name that does not resolve and one that resolves to a refused address read the
 * same, "host not found or address not allowed", so the log cannot map the internal network's
 * names (does `db.internal` exist?); a host that does not take the connection reads "connection
 * failed" (the name gave an allowed address: nothing internal is told). A literal refused address
 * or localhost name, known without asking DNS, reads "address not allowed". All are retried as
 * any failure is: a name can come to resolve elsewhere.
 */
export const DELIVERY_ERRORS = {
  notAllowed: "address not allowed",
  unusableHost: "host not found or address not allowed",
  connection: "connection failed",
  tls: "TLS handshake failed",
  invalidUrl: "invalid URL",
} as const;

/** The log text of a request error: a name that gave no usable address, a TLS failure, or else one text. */
function connectionError(err: Error): string {
  if (isUnusableHostError(err)) return DELIVERY_ERRORS.unusableHost;
  const code = String((err as NodeJS.ErrnoException).code ?? "");
  const tls = /^(ERR_TLS_|ERR_SSL_|CERT_|UNABLE_TO_|DEPTH_ZERO_|SELF_SIGNED_)/.test(code);
  return tls ? DELIVERY_ERRORS.tls : DELIVERY_ERRORS.connection;
}

export function sendAttempt(a: Attempt): Promise<AttemptResult> {
  return new Promise((resolve) => {
    let settled = false;
    // Declared first: the refusals below settle before any timer is set.
    let timer: NodeJS.Timeout | undefined;
    const done = (r: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(r);
    };
    let url: URL;
    try {
      url = new URL(a.url);
    } catch {
      return done({ ok: false, httpStatus: null, error: DELIVERY_ERRORS.invalidUrl });
    }
    if (!a.allowPrivate && isRefusedHost(url.hostname)) {
      return done({ ok: false, httpStatus: null, error: DELIVERY_ERRORS.notAllowed });
    }
    const headers: Record<string, string | number> = {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(a.body),
      "user-agent": USER_AGENT,
      "x-service-event-type": a.eventType,
      "x-service-event-id": a.eventId,
      "x-service-timestamp": a.timestamp,
    };
    if (a.secret) headers["x-service-signature"] = signature(a.secret, a.body);
    const secure = url.protocol === "https:";
    const client = secure ? https : http;
    const req = client.request(url, {
      method: "POST",
      headers,
      lookup: guardedLookup(a.allowPrivate, a.resolve) as never,
      agent: (secure ? a.agents?.https : a.agents?.http) ?? false,
    });
    timer = setTimeout(() => {
      req.destroy();
      done({ ok: false, httpStatus: null, error: `timed out after ${a.timeoutMs} ms` });
    }, a.timeoutMs);
    req.on("response", (res) => {
      const status = res.statusCode ?? 0;
      // The answer's body is not kept: read (at most 64 KB) and dropped.
      let read = 0;
      res.on("data", (chunk: Buffer) => {
        read += chunk.length;
        if (read > 65_536) res.destroy();
      });
      const finish = () =>
        done({
          ok: status >= 200 && status < 300,
          httpStatus: status,
          error: status >= 200 && status < 300 ? null : `HTTP ${status}`,
        });
      res.on("end", finish);
      res.on("close", finish);
      res.on("error", finish);
    });
    req.on("error", (err) => {
      const code = (err as NodeJS.ErrnoException).code;
      done({
        ok: false,
        httpStatus: null,
        error: connectionError(err),
        detail: code ? `${code}: ${err.message}` : err.message,
      });
    });
    req.end(a.body);
  });
}
