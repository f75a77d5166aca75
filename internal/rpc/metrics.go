// Metrics count and time gRPC calls, on the serving and the calling
// side, for dashboards and alerts: rate, errors (by gRPC code) and duration of
// every method. Labels are bounded: the service and method names from the
// method's full name and the status code, never an id.

package rpc

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// Metric names, as dashboards and alerts use them.
const (
	// ServerHandledMetric counts calls a server answered, by service, method and code.
	ServerHandledMetric = "mantis_grpc_server_handled_total"
	// ServerDurationMetric times calls a server answered, by service and method.
	ServerDurationMetric = "mantis_grpc_server_handling_seconds"
	// ClientHandledMetric counts calls a client made, by service, method and code.
	ClientHandledMetric = "mantis_grpc_client_handled_total"
	// ClientDurationMetric times calls a client made, by service and method.
	ClientDurationMetric = "mantis_grpc_client_handling_seconds"
)

// durationBuckets span a quick unary call to a long poll (60 s) and a listen
// agent's RunCommand, which lasts as long as its command.
var durationBuckets = []float64{.001, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// Metrics are the gRPC metrics of one process. A nil *Metrics records nothing
// and adds no interceptors.
type Metrics struct {
	serverHandled  *prometheus.CounterVec
	serverDuration *prometheus.HistogramVec
	clientHandled  *prometheus.CounterVec
	clientDuration *prometheus.HistogramVec
}

// NewMetrics registers the gRPC metrics with reg, or reuses those already registered
// there, so that every server and client of a process shares one set.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"service", "method", "code"}
	return &Metrics{
		serverHandled: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ServerHandledMetric, Help: "gRPC calls answered, by service, method and status code.",
		}, labels)),
		serverDuration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: ServerDurationMetric, Help: "Time to answer a gRPC call, by service and method.", Buckets: durationBuckets,
		}, labels[:2])),
		clientHandled: register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: ClientHandledMetric, Help: "gRPC calls made, by service, method and status code.",
		}, labels)),
		clientDuration: register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: ClientDurationMetric, Help: "Time until a gRPC call was answered, by service and method.", Buckets: durationBuckets,
		}, labels[:2])),
	}
}

func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err) // a programming error: a clashing metric name
	}
	return c
}

// ServerOptions are the interceptors that count and time every call a server
// answers, unary and streaming.
func (m *Metrics) ServerOptions() []grpc.ServerOption {
	if m == nil {
		return nil
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(m.unaryServer), grpc.ChainStreamInterceptor(m.streamServer)}
}

// DialOptions are the interceptors that count and time every call a client
// makes, unary and streaming (until the stream is set up).
func (m *Metrics) DialOptions() []grpc.DialOption {
	if m == nil {
		return nil
	}
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(m.unaryClient), grpc.WithChainStreamInterceptor(m.streamClient)}
}

func (m *Metrics) unaryServer(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	start := time.Now()
	resp, err := h(ctx, req)
	observe(m.serverHandled, m.serverDuration, info.FullMethod, start, err)
	return resp, err
}

func (m *Metrics) streamServer(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	start := time.Now()
	err := h(srv, ss)
	observe(m.serverHandled, m.serverDuration, info.FullMethod, start, err)
	return err
}

func (m *Metrics) unaryClient(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	start := time.Now()
	err := invoker(ctx, method, req, reply, cc, opts...)
	observe(m.clientHandled, m.clientDuration, method, start, err)
	return err
}

func (m *Metrics) streamClient(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	start := time.Now()
	s, err := streamer(ctx, desc, cc, method, opts...)
	observe(m.clientHandled, m.clientDuration, method, start, err)
	return s, err
}

func observe(handled *prometheus.CounterVec, duration *prometheus.HistogramVec, fullMethod string, start time.Time, err error) {
	service, method := SplitMethod(fullMethod)
	handled.WithLabelValues(service, method, status.Code(err).String()).Inc()
	duration.WithLabelValues(service, method).Observe(time.Since(start).Seconds())
}

// SplitMethod splits a gRPC full method name, "/mantis.v1.MandibleService/Register",
// into its service and method; a name of another shape is the method of service
// "unknown".
func SplitMethod(fullMethod string) (service, method string) {
	service, method, ok := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	if !ok {
		return "unknown", fullMethod
	}
	return service, method
}

// Describe implements prometheus.Collector, so that the metrics can be added to
// another registry that serves them.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.serverHandled.Describe(ch)
	m.serverDuration.Describe(ch)
	m.clientHandled.Describe(ch)
	m.clientDuration.Describe(ch)
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.serverHandled.Collect(ch)
	m.serverDuration.Collect(ch)
	m.clientHandled.Collect(ch)
	m.clientDuration.Collect(ch)
}
