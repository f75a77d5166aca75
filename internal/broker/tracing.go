package broker

import (
	"context"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/mantis-deploy/mantis/internal/telemetry"
)

// NudgeSpan names the span of a nudge's processing by a consumer.
const NudgeSpan = "command.nudge"

// nudgeHeaders are the AMQP headers of n: its trace context, when it has one.
func nudgeHeaders(n Nudge) amqp.Table {
	if n.TraceParent == "" {
		return nil
	}
	return amqp.Table{telemetry.TraceParentKey: n.TraceParent}
}

// traceParentHeader reads the trace context a nudge's headers carry, "" for none.
func traceParentHeader(h amqp.Table) string {
	s, _ := h[telemetry.TraceParentKey].(string)
	return s
}

// startNudgeSpan starts the consumer span of a nudge, continuing the trace its
// headers carry (the delivery of the command).
func startNudgeSpan(ctx context.Context, d Delivery, n Nudge) (context.Context, trace.Span) {
	ctx = telemetry.WithTraceParent(ctx, n.TraceParent)
	return telemetry.Tracer().Start(ctx, NudgeSpan, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String(telemetry.AttrCommandID, n.CommandID),
			attribute.String(telemetry.AttrTarget, n.Target),
			attribute.String("messaging.destination.name", CommandQueue(d.Priority)),
			attribute.Bool("messaging.rabbitmq.redelivered", d.Redelivered),
		))
}
