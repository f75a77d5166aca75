package telemetry

import (
	"context"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
)

// httpOperation names the HTTP server's spans when the request matched no route.
const httpOperation = "mantis.http"

// routeKey carries a request's *routeName from HTTPHandler down to NameRoute.
type routeKey struct{}

// routeName is the route a request matched, once NameRoute has named it.
type routeName struct{ pattern string }

// HTTPHandler wraps h so that each request is a server span continuing the caller's
// trace context. The span is named after the method until a route names it
// (NameRoute). otelhttp names the span again once the handler returns, whenever a
// ServeMux on the way set the request's Pattern (the outermost mux's "/" or "/api/",
// not the route's), so its formatter takes the name NameRoute recorded.
func HTTPHandler(h http.Handler) http.Handler {
	traced := otelhttp.NewHandler(h, httpOperation, otelhttp.WithSpanNameFormatter(func(_ string, r *http.Request) string {
		if rn, ok := r.Context().Value(routeKey{}).(*routeName); ok && rn.pattern != "" {
			return rn.pattern
		}
		return r.Method + " " + httpOperation
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		traced.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), routeKey{}, &routeName{})))
	})
}

// NameRoute wraps a route's handler so that the request's server span is named after
// the route's pattern (POST /api/v1/deployments) and carries it as http.route: a name
// of few values, whatever ids the path holds.
func NameRoute(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if rn, ok := r.Context().Value(routeKey{}).(*routeName); ok {
			rn.pattern = pattern
		}
		span := trace.SpanFromContext(r.Context())
		span.SetName(pattern)
		span.SetAttributes(semconv.HTTPRoute(pattern))
		h.ServeHTTP(w, r)
	})
}

// GRPCServerOption makes every call a gRPC server serves a span continuing the caller's
// trace context.
func GRPCServerOption() grpc.ServerOption {
	return grpc.StatsHandler(otelgrpc.NewServerHandler())
}

// GRPCDialOption makes every call of a gRPC client a span whose context travels to the
// server in the call's metadata.
func GRPCDialOption() grpc.DialOption {
	return grpc.WithStatsHandler(otelgrpc.NewClientHandler())
}
