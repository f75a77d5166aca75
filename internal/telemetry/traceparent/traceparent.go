// Package traceparent writes the W3C traceparent of the span a context holds: what a
// command row and a broker nudge carry, so that the process that picks the command
// up continues the trace. It links OpenTelemetry's trace API only, not its
// propagators (which link net/http), so that the store can record it without
// linking an HTTP or gRPC stack.
package traceparent

import (
	"context"

	"go.opentelemetry.io/otel/trace"
)

// version is the traceparent format version written, W3C Trace Context's "00".
const version = "00"

// Of returns the traceparent of the span in ctx, "00-<trace id>-<span id>-<flags>"
// as W3C Trace Context's propagator writes it, or "" when ctx holds no valid span
// context.
func Of(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	flags := sc.TraceFlags() & (trace.FlagsSampled | trace.FlagsRandom) // the flags the format defines
	return version + "-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags.String()
}
