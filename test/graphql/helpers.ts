// GraphQL over HTTP for tests: POST /graphql through app.inject with a bearer token.
import type { FastifyInstance } from "fastify";
import { bearer } from "../helpers/auth.ts";

export interface GraphQLReply {
  status: number;
  // biome-ignore lint/suspicious/noExplicitAny: test bodies are inspected freely
  body: any;
}

export function graphqlClient(app: FastifyInstance, token: string | null, path = "/graphql") {
  return async (query: string, variables: Record<string, unknown> = {}): Promise<GraphQLReply> => {
    const res = await app.inject({
      method: "POST",
      url: path,
      headers: {
        ...(token ? bearer(token) : {}),
        "content-type": "application/json",
        accept: "application/json",
      },
      payload: { query, variables },
    });
    return { status: res.statusCode, body: res.json() };
  };
}
