package agent

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/mantis-deploy/mantis/internal/telemetry"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// RunSpan names the span of a command's run on the host.
const RunSpan = "command.run"

// startRunSpan starts the span of cmd's run. Its parent is ctx's span when that is in
// the trace cmd carries (a listen agent's RunCommand call), else the hand-off span
// cmd carries (a poll agent, whose poll is no part of the command's trace).
func startRunSpan(ctx context.Context, cmd *mantisv1.Command) (context.Context, trace.Span) {
	carried := trace.SpanContextFromContext(telemetry.WithTraceParent(context.Background(), cmd.GetTraceParent()))
	if current := trace.SpanContextFromContext(ctx); !current.IsValid() || current.TraceID() != carried.TraceID() {
		ctx = telemetry.WithTraceParent(ctx, cmd.GetTraceParent())
	}
	return telemetry.Tracer().Start(ctx, RunSpan, trace.WithAttributes(
		attribute.String(telemetry.AttrCommandID, cmd.GetId()),
		attribute.String(telemetry.AttrDispatchRequestID, cmd.GetDispatchRequestId()),
		attribute.String(telemetry.AttrTarget, cmd.GetTarget()),
	))
}

// endRunSpan records how the run ended (exit code, duration, timeout, error) and ends
// the span.
func endRunSpan(span trace.Span, res *mantisv1.CommandResult) {
	span.SetAttributes(
		attribute.Int(telemetry.AttrExitCode, int(res.GetExitCode())),
		attribute.Bool(telemetry.AttrTimedOut, res.GetTimedOut()),
	)
	if res.GetStartedAt() != nil && res.GetFinishedAt() != nil {
		d := res.GetFinishedAt().AsTime().Sub(res.GetStartedAt().AsTime())
		span.SetAttributes(attribute.Int64(telemetry.AttrDurationMS, d.Milliseconds()))
	}
	switch {
	case res.GetError() != "":
		span.SetStatus(codes.Error, res.GetError())
	case res.GetExitCode() != 0:
		span.SetStatus(codes.Error, "command exited non-zero")
	}
	span.End()
}
