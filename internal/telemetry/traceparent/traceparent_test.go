package traceparent_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/mantis-deploy/mantis/internal/telemetry/traceparent"
)

// Of writes what OpenTelemetry's W3C propagator writes, whatever the flags, and
// nothing for a context without a span: a command continues the same trace whether
// its traceparent came from the store or from a header.
func TestOfWritesWhatThePropagatorWrites(t *testing.T) {
	t.Parallel()
	for _, flags := range []trace.TraceFlags{trace.FlagsSampled, 0, trace.FlagsRandom, 0xff} {
		sc := trace.NewSpanContext(trace.SpanContextConfig{
			TraceID:    trace.TraceID{0x4b, 0xf9, 0x2f, 0x35, 0x77, 0xb3, 0x4d, 0xa6, 0xa3, 0xce, 0x92, 0x9d, 0x0e, 0x0e, 0x47, 0x36},
			SpanID:     trace.SpanID{0x00, 0xf0, 0x67, 0xaa, 0x0b, 0xa9, 0x02, 0xb7},
			TraceFlags: flags,
			Remote:     true,
		})
		ctx := trace.ContextWithSpanContext(context.Background(), sc)
		carrier := propagation.MapCarrier{}
		propagation.TraceContext{}.Inject(ctx, carrier)
		require.Equal(t, carrier["traceparent"], traceparent.Of(ctx), "flags %s", flags)
		require.NotEmpty(t, traceparent.Of(ctx))
	}
	require.Empty(t, traceparent.Of(context.Background()))
}
