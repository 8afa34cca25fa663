// One webhook attempt over HTTP (spec 6.1.2–6.1.3): POST of the exact body bytes with the four
// headers and the HMAC signature, bounded by the registration's TIMEOUT_MS, to an address checked
// at connection time.
import { createHmac } from "node:crypto";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { AddressNotAllowedError, guardedLookup, isPrivateAddress } from "./addresses.ts";

export interface Attempt {
  url: string;
  body: string;
  secret: string | null;
  eventId: string;
  eventType: string;
  timestamp: string;
  timeoutMs: number;
  allowPrivate: boolean;
}

export interface AttemptResult {
  ok: boolean;
  httpStatus: number | null;
  error: string | null;
}

/** `sha256=` and the lower-case hex HMAC-SHA256 of the body, keyed with the secret. */
export function signature(secret: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(body, "utf8").digest("hex")}`;
}

const USER_AGENT = "Dimensio-Webhooks/1";

export function sendAttempt(a: Attempt): Promise<AttemptResult> {
  return new Promise((resolve) => {
    let settled = false;
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
      return done({ ok: false, httpStatus: null, error: "invalid URL" });
    }
    const host = url.hostname.replace(/^\[|\]$/g, "");
    if (!a.allowPrivate && net.isIP(host) && isPrivateAddress(host)) {
      return done({ ok: false, httpStatus: null, error: `${host} is a private address` });
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
    const client = url.protocol === "https:" ? https : http;
    const req = client.request(url, {
      method: "POST",
      headers,
      lookup: guardedLookup(a.allowPrivate) as never,
      agent: false,
    });
    const timer = setTimeout(() => {
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
      const message =
        err instanceof AddressNotAllowedError
          ? err.message
          : `${(err as NodeJS.ErrnoException).code ?? "error"}: ${err.message}`;
      done({ ok: false, httpStatus: null, error: message.slice(0, 1000) });
    });
    req.end(a.body);
  });
}
