// OpenTelemetry tracing hooks (issue 13): one server span per HTTP request, continuing the caller's
// trace (W3C traceparent), named by the route pattern, with the status code. Written against
// @opentelemetry/api only: without an SDK registered the API is a no-op, so tracing is off unless
// the operator starts the service with one (docs/deploy.md: NODE_OPTIONS with the SDK's register).
import {
  context,
  propagation,
  ProxyTracerProvider,
  type Span,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from "@opentelemetry/api";
import type { FastifyInstance } from "fastify";

const spans = new WeakMap<object, Span>();

/**
 * The SDK's tracer, or null while none is registered (the API alone would hand out a no-op tracer:
 * a request then skips the span's attributes and the header extraction as well). Asked per request,
 * so that an SDK registered after start-up is used from its next request.
 */
function sdkTracer(): Tracer | null {
  const provider = trace.getTracerProvider();
  if (provider instanceof ProxyTracerProvider) return provider.getDelegateTracer("dimensio") ?? null;
  return provider.getTracer("dimensio");
}

export function traceRequests(app: FastifyInstance, role: string): void {
  // Written with `done`, not async: two promises fewer per request (issue 19).
  app.addHook("onRequest", (request, _reply, done) => {
    const tracer = sdkTracer();
    if (!tracer) return done();
    const parent = propagation.extract(context.active(), request.headers);
    const route = request.routeOptions.url ?? "unmatched";
    const span = tracer.startSpan(
      `${request.method} ${route}`,
      {
        kind: SpanKind.SERVER,
        attributes: {
          "http.request.method": request.method,
          "http.route": route,
          "url.path": request.url.split("?")[0],
          "dimensio.role": role,
          "dimensio.request_id": request.id,
        },
      },
      parent,
    );
    spans.set(request, span);
    done();
  });
  app.addHook("onResponse", (request, reply, done) => {
    const span = spans.get(request);
    if (span) {
      span.setAttribute("http.response.status_code", reply.statusCode);
      if (reply.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    }
    done();
  });
}
