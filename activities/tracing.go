package activities

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/telemetry"
)

// DeliverSpan names the span of one command's delivery in its deployment's trace.
const DeliverSpan = "command.deliver"

// deliverySpans are the open command.deliver spans of one batch.
type deliverySpans []trace.Span

// startDeliverySpans starts a command.deliver span for each nudge of a traced command:
// a child of the trace the command was enqueued in (its deployment's), linked to the
// dispatcher's activity span that delivers the whole batch. Each nudge then carries its
// span's context, so that the consumer continues the deployment's trace.
func startDeliverySpans(ctx context.Context, nudges []broker.Nudge) deliverySpans {
	batch := trace.LinkFromContext(ctx)
	var spans deliverySpans
	for i, n := range nudges {
		if n.TraceParent == "" {
			continue
		}
		cctx, span := telemetry.Tracer().Start(telemetry.WithTraceParent(context.WithoutCancel(ctx), n.TraceParent), DeliverSpan,
			trace.WithSpanKind(trace.SpanKindProducer), trace.WithLinks(batch),
			trace.WithAttributes(
				attribute.String(telemetry.AttrCommandID, n.CommandID),
				attribute.String(telemetry.AttrTarget, n.Target),
				attribute.String(telemetry.AttrMode, n.Mode),
				attribute.String(telemetry.AttrPriority, n.Priority),
			))
		nudges[i].TraceParent = telemetry.TraceParent(cctx)
		spans = append(spans, span)
	}
	return spans
}

// end ends the spans, recording a publish failure on each (a broker resting is not
// one: polling picks the commands up).
func (s deliverySpans) end(publishErr error) {
	for _, span := range s {
		if publishErr != nil && !errors.Is(publishErr, broker.ErrResting) {
			span.SetStatus(codes.Error, "publishing the nudge failed")
			span.RecordError(publishErr)
		}
		span.End()
	}
}
