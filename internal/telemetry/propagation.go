package telemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mantis-deploy/mantis/internal/telemetry/traceparent"
)

// TraceParentKey is the W3C trace context field that carries a span's identity, the
// name of the AMQP header of a nudge that carries one.
const TraceParentKey = "traceparent"

// tracerName is the instrumentation scope of Mantis's own spans.
const tracerName = "github.com/mantis-deploy/mantis"

// Tracer returns the tracer of Mantis's own spans, from the process's provider.
func Tracer() trace.Tracer { return otel.Tracer(tracerName) }

// TraceParent returns the W3C traceparent of the span in ctx, or "" when ctx holds no
// valid span context. It is what a command row and a nudge carry, so that a process
// that picks the command up continues the trace; traceparent.Of writes it, for the
// store, which links no propagator.
func TraceParent(ctx context.Context) string { return traceparent.Of(ctx) }

// WithTraceParent returns ctx with the remote span context traceParent names as the
// parent of the spans started from it. An empty or malformed traceParent leaves ctx
// as it is.
func WithTraceParent(ctx context.Context, traceParent string) context.Context {
	if traceParent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{TraceParentKey: traceParent})
}

// Follow returns ctx carrying the span of from: work that outlives a call (a result
// stored after the agent hung up) stays in the call's trace.
func Follow(ctx, from context.Context) context.Context {
	return trace.ContextWithSpan(ctx, trace.SpanFromContext(from))
}
