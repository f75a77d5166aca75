package agent

import (
	"errors"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/mantis-deploy/mantis/internal/rpc"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// Metric names, as dashboards and alerts use them.
const (
	// CommandsMetric counts the commands the agent ran, by outcome.
	CommandsMetric = "mantis_agent_commands_total"
	// CommandDurationMetric times them, by outcome.
	CommandDurationMetric = "mantis_agent_command_duration_seconds"
	// OutputBytesMetric is the size of their output as kept (the tail), by command.
	OutputBytesMetric = "mantis_agent_command_output_bytes"
)

// Outcomes of a command (the outcome label of CommandsMetric).
const (
	outcomeSucceeded = "succeeded" // exited 0
	outcomeFailed    = "failed"    // exited non-zero
	outcomeTimedOut  = "timed_out"
	outcomeCancelled = "cancelled"
	outcomeNotRun    = "error" // could not run or complete (the shell did not start)
)

// Why the agent is not ready (/readyz).
var (
	errStarting          = errors.New("starting")
	errThoraxUnreachable = errors.New("not connected to thorax")
	errNotServing        = errors.New("not serving")
)

// Metrics are the agent's metrics and its readiness. A nil *Metrics records
// nothing.
type Metrics struct {
	reg      prometheus.Registerer
	commands *prometheus.CounterVec
	duration *prometheus.HistogramVec
	output   prometheus.Histogram
	rpc      *rpc.Metrics
	ready    atomic.Pointer[func() error]
}

// NewMetrics registers the agent's metrics with reg (a metrics listener's
// registry); Run registers the identity metrics there too.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		reg: reg,
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: CommandsMetric, Help: "Commands run, by outcome (succeeded, failed, timed_out, cancelled, error).",
		}, []string{"outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: CommandDurationMetric, Help: "Time a command ran, from start to end, by outcome.",
			Buckets: []float64{.01, .05, .1, .5, 1, 5, 10, 30, 60, 300, 900, 3600},
		}, []string{"outcome"}),
		output: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: OutputBytesMetric, Help: "Output a command returned (its kept tail), in bytes.",
			Buckets: prometheus.ExponentialBuckets(64, 4, 10), // 64 B to 16 MiB
		}),
		rpc: rpc.NewMetrics(reg),
	}
	reg.MustRegister(m.commands, m.duration, m.output)
	return m
}

// Readiness is nil while the agent takes work: in poll mode while it is
// connected to Thorax, in listen mode while it serves.
func (m *Metrics) Readiness() error {
	check := m.ready.Load()
	if check == nil {
		return errStarting
	}
	return (*check)()
}

func (m *Metrics) setReadiness(check func() error) {
	if m != nil {
		m.ready.Store(&check)
	}
}

// finished counts one run's result.
func (m *Metrics) finished(res *mantisv1.CommandResult) {
	if m == nil {
		return
	}
	outcome := commandOutcome(res)
	m.commands.WithLabelValues(outcome).Inc()
	if res.GetStartedAt() != nil && res.GetFinishedAt() != nil {
		m.duration.WithLabelValues(outcome).Observe(res.GetFinishedAt().AsTime().Sub(res.GetStartedAt().AsTime()).Seconds())
	}
	m.output.Observe(float64(len(res.GetOutput())))
}

func commandOutcome(res *mantisv1.CommandResult) string {
	switch {
	case res.GetTimedOut(): // a killed run explains itself in error too
		return outcomeTimedOut
	case res.GetCancelled():
		return outcomeCancelled
	case res.GetError() != "":
		return outcomeNotRun
	case res.GetExitCode() == 0:
		return outcomeSucceeded
	}
	return outcomeFailed
}

func (m *Metrics) dialOptions() []grpc.DialOption {
	if m == nil {
		return nil
	}
	return m.rpc.DialOptions()
}

func (m *Metrics) serverOptions() []grpc.ServerOption {
	if m == nil {
		return nil
	}
	return m.rpc.ServerOptions()
}

// connectedTo is a readiness check: nil while conn is connected.
func connectedTo(conn *grpc.ClientConn) func() error {
	return func() error {
		if conn.GetState() != connectivity.Ready {
			return errThoraxUnreachable
		}
		return nil
	}
}
