// A small client for the write tests: JSON requests through app.inject with a bearer token.
import type { FastifyInstance } from "fastify";
import { bearer, loginAs, SAMPLE_USERS } from "../helpers/auth.ts";

export interface Reply {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected freely
  body: any;
}

export interface Client {
  post(url: string, payload?: unknown): Promise<Reply>;
  put(url: string, payload?: unknown): Promise<Reply>;
  patch(url: string, payload?: unknown): Promise<Reply>;
  delete(url: string, payload?: unknown): Promise<Reply>;
  get(url: string): Promise<Reply>;
}

export function client(app: FastifyInstance, token: string | null): Client {
  const send = async (
    method: "GET" | "POST" | "PUT" | "PATCH" | "DELETE",
    url: string,
    payload?: unknown,
  ) => {
    const res = await app.inject({
      method,
      url,
      headers: token ? bearer(token) : {},
      ...(payload === undefined ? {} : { payload: payload as Record<string, unknown> }),
    });
    return { status: res.statusCode, body: res.body ? res.json() : null };
  };
  return {
    post: (url, payload) => send("POST", url, payload),
    put: (url, payload) => send("PUT", url, payload),
    patch: (url, payload) => send("PATCH", url, payload),
    delete: (url, payload) => send("DELETE", url, payload),
    get: (url) => send("GET", url),
  };
}

export async function clientFor(app: FastifyInstance, user: keyof typeof SAMPLE_USERS): Promise<Client> {
  const { username, password } = SAMPLE_USERS[user];
  return client(app, await loginAs(app, username, password));
}

/** Rate limits off: the write tests send many requests per second on purpose. */
/** Rate limits off (tests send many requests a second as one user). */
export { UNLIMITED_ENV as NO_RATE_LIMITS } from "../helpers/auth.ts";
