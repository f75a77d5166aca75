package thorax

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/mantis-deploy/mantis/internal/telemetry"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// HandoffSpan names the span of a command's hand-off to its agent.
const HandoffSpan = "command.handoff"

// startHandoff starts the hand-off span of cmd in the trace the command carries (its
// deployment's, stored with the command row), or ctx's when it carries none. It
// returns the context of the span and a copy of cmd carrying the span's context, so
// that the agent's run is a child of the hand-off whichever side calls.
func startHandoff(ctx context.Context, cmd *mantisv1.Command) (context.Context, trace.Span, *mantisv1.Command) {
	ctx, span := telemetry.Tracer().Start(telemetry.WithTraceParent(ctx, cmd.GetTraceParent()), HandoffSpan,
		trace.WithAttributes(
			attribute.String(telemetry.AttrCommandID, cmd.GetId()),
			attribute.String(telemetry.AttrDispatchRequestID, cmd.GetDispatchRequestId()),
			attribute.String(telemetry.AttrDeploymentID, cmd.GetDeploymentId()),
			attribute.String(telemetry.AttrTarget, cmd.GetTarget()),
			attribute.String(telemetry.AttrMode, cmd.GetMode()),
			attribute.String(telemetry.AttrPriority, cmd.GetPriority()),
		))
	if tp := telemetry.TraceParent(ctx); tp != "" {
		cmd = proto.CloneOf(cmd)
		cmd.TraceParent = tp
	}
	return ctx, span, cmd
}
