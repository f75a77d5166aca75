package telemetry_test

import (
	"fmt"
	"os"
	"testing"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace/noop"
)

// Setup sets OpenTelemetry's process-wide globals: the tracer provider, the propagator
// and the error handler. Each test that calls it restores them (keepGlobals); TestMain
// starts from known values and fails the run when a test leaves them changed, so that
// a test that forgets fails itself rather than the tests that run after it.
func TestMain(m *testing.M) {
	tp, prop, eh := noop.NewTracerProvider(), propagation.TraceContext{}, &quietHandler{}
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(prop)
	otel.SetErrorHandler(eh)
	code := m.Run()
	if code == 0 && (otel.GetTracerProvider() != tp || otel.GetTextMapPropagator() != prop || otel.GetErrorHandler() != eh) {
		fmt.Fprintln(os.Stderr, "a test left OpenTelemetry's globals changed: call keepGlobals(t) before telemetry.Setup")
		code = 1
	}
	os.Exit(code)
}

// quietHandler is the error handler the tests start from.
type quietHandler struct{}

func (*quietHandler) Handle(error) {}

// keepGlobals restores OpenTelemetry's globals as they are now when t ends.
func keepGlobals(t *testing.T) {
	tp, prop, eh := otel.GetTracerProvider(), otel.GetTextMapPropagator(), otel.GetErrorHandler()
	t.Cleanup(func() {
		otel.SetTracerProvider(tp)
		otel.SetTextMapPropagator(prop)
		otel.SetErrorHandler(eh)
	})
}
