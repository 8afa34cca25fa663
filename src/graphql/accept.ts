// What a GraphQL HTTP request's Accept header lets the service answer with, read as graphql-yoga
// reads it (its result processors: a media type with a charset other than utf-8 is not taken),
// and the 406 a request gets when it accepts none of them: the standard error body
// (`errors[].extensions.code` NOT_ACCEPTABLE, `status` 406), never yoga's empty `null`. A
// subscription is refused before it is admitted (src/graphql/chain.ts), so a request that cannot
// carry its stream holds no live-subscription place.
import { GraphQLError } from "graphql";

/** The media types a query or a mutation is answered with. */
export const RESULT_MEDIA_TYPES = ["application/json", "application/graphql-response+json"] as const;
/** The media type a subscription streams its results in over HTTP (GraphQL over SSE). */
export const STREAM_MEDIA_TYPE = "text/event-stream";
/** Every media type yoga answers a request with (multipart/mixed: incremental delivery). */
const ANSWERED = [...RESULT_MEDIA_TYPES, STREAM_MEDIA_TYPE, "multipart/mixed"];

/** The media types of an Accept header (none: any), as yoga reads them. */
function acceptedTypes(accept: string | undefined): string[] {
  const out: string[] = [];
  for (const item of (accept || "*/*").replace(/\s/g, "").toLowerCase().split(",")) {
    const [type, ...params] = item.split(";");
    const charset = params.find((p) => p.includes("charset=")) ?? "charset=utf-8";
    if (type && charset === "charset=utf-8") out.push(type);
  }
  return out;
}

function matches(accepted: string, mediaType: string): boolean {
  const [pre, suf] = accepted.split("/");
  const [wantPre, wantSuf] = mediaType.split("/");
  return (pre === "*" || pre === wantPre) && (suf === "*" || suf === wantSuf);
}

/** Whether an Accept header takes `mediaType`. */
export function accepts(accept: string | undefined, mediaType: string): boolean {
  return acceptedTypes(accept).some((a) => matches(a, mediaType));
}

/** Whether an Accept header takes any media type a GraphQL request may be answered with. */
export function acceptsAnyAnswer(accept: string | undefined): boolean {
  const types = acceptedTypes(accept);
  return ANSWERED.some((mediaType) => types.some((a) => matches(a, mediaType)));
}

/** The 406 error of a request whose Accept header takes none of the media types it could get. */
export function notAcceptable(kind: "request" | "subscription"): GraphQLError {
  const message =
    kind === "subscription"
      ? `A subscription streams its results: send Accept: ${STREAM_MEDIA_TYPE} (GraphQL over SSE), or subscribe over the WebSocket.`
      : `Send Accept: ${RESULT_MEDIA_TYPES.join(" or ")} (or ${STREAM_MEDIA_TYPE} for a subscription); nothing else is answered here.`;
  return new GraphQLError(message, {
    extensions: {
      code: "NOT_ACCEPTABLE",
      status: 406,
      http: { status: 406 },
    },
  });
}

/** The body of a 406, as every other GraphQL error body (the internal `http` left out). */
export function notAcceptableBody(kind: "request" | "subscription"): { errors: object[] } {
  const error = notAcceptable(kind);
  const { http: _http, ...extensions } = error.extensions;
  return { errors: [{ message: error.message, extensions }] };
}
