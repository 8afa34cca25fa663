import pino, { type Logger } from "pino";

export type { Logger };

/** Structured JSON logs; secrets never reach them. */
export function createLogger(level: string): Logger {
  return pino({
    level,
    redact: {
      paths: [
        "req.headers.authorization",
        "req.headers.cookie",
        "headers.authorization",
        'req.headers["x-gateway-secret"]',
        'headers["x-gateway-secret"]',
        "*.password",
        "*.refresh_token",
        "*.access_token",
        "password",
      ],
      censor: "[redacted]",
    },
  });
}
