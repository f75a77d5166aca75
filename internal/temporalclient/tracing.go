package temporalclient

import (
	"go.opentelemetry.io/otel"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"
)

// tracingInterceptor is the Temporal client and worker interceptor that carries trace
// context in workflow and activity headers: starting a workflow, its activities and
// their runs are spans of the caller's trace. It creates no span while a workflow
// replays, so it is safe for determinism. It reads the process-wide propagator that
// telemetry sets up. It lives here rather than in telemetry so that a process that
// traces but never dials Temporal (the agent) does not link the Temporal SDK.
func tracingInterceptor() (interceptor.Interceptor, error) {
	return temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		TextMapPropagator: otel.GetTextMapPropagator(),
	})
}
