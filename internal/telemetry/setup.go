// Package telemetry is Mantis's OpenTelemetry tracing: the tracer provider each process
// sets up from its [tracing] section, the W3C trace context that follows one deployment
// across processes (HTTP, gRPC, Temporal headers, the command row and the broker nudge),
// and the instrumentation options of the HTTP and gRPC servers and clients.
//
// The provider and the propagator are OpenTelemetry's process-wide ones: the
// instrumentation libraries (otelhttp, otelgrpc, the Temporal interceptor in
// internal/temporalclient) read them, so main sets them once, before it serves, and
// shuts the provider down last. This package links no Temporal SDK, so that the agent,
// which traces but never dials Temporal, does not either.
package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/version"
)

// Default service names of the processes, used when tracing.service_name is empty.
const (
	ServiceMandible = "mantis-mandible"
	ServiceThorax   = "mantis-thorax"
	ServiceAgent    = "mantis-agent"
)

// Shutdown flushes the spans not yet exported and stops the provider.
type Shutdown func(context.Context) error

// Setup installs the W3C trace context propagator and, when cfg enables tracing, a
// tracer provider exporting over OTLP/HTTP to cfg.Endpoint with a parent-based ratio
// sampler, naming the process cfg.ServiceNameOr(defaultService). The returned Shutdown
// flushes what is buffered; call it when the process stops. Without an endpoint spans
// are not recorded, but trace context still passes through the process.
func Setup(ctx context.Context, cfg config.Tracing, defaultService string, logger *slog.Logger) (Shutdown, error) {
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	ratio, _ := cfg.SampleRatio.Value() // checked by Validate
	exporter, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.Endpoint))
	if err != nil {
		return nil, fmt.Errorf("creating the OTLP trace exporter for %s: %w", cfg.Endpoint, err)
	}
	service := cfg.ServiceNameOr(defaultService)
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(service), semconv.ServiceVersion(version.Get().Version)))
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("describing the trace resource: %w", err)
	}
	provider := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(ratio))),
	)
	otel.SetTracerProvider(provider)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("exporting trace spans failed", "err", err)
	}))
	logger.InfoContext(ctx, "tracing enabled", "endpoint", cfg.Endpoint, "service_name", service, "sample_ratio", ratio)
	return func(ctx context.Context) error {
		if err := provider.Shutdown(ctx); err != nil {
			return fmt.Errorf("flushing trace spans: %w", err)
		}
		return nil
	}, nil
}

// flushTimeout bounds the flush of the last spans when a process stops.
const flushTimeout = 5 * time.Second

// Start is Setup for a process's main: the returned stop flushes the spans within
// flushTimeout, logging a failure, and is meant to be deferred.
func Start(ctx context.Context, cfg config.Tracing, defaultService string, logger *slog.Logger) (stop func(), err error) {
	shutdown, err := Setup(ctx, cfg, defaultService, logger)
	if err != nil {
		return nil, fmt.Errorf("setting up tracing: %w", err)
	}
	return func() {
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), flushTimeout)
		defer cancel()
		if err := shutdown(flushCtx); err != nil {
			logger.WarnContext(flushCtx, "flushing trace spans failed", "err", err)
		}
	}, nil
}
