package activities

import (
	"context"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/mantis-deploy/mantis/schema"
)

// Deployment metric names, as dashboards and alerts use them.
const (
	// DeploymentsStartedMetric counts deployments that started running.
	DeploymentsStartedMetric = "mantis_deployments_started_total"
	// DeploymentsFinishedMetric counts deployments that ended, by final status.
	DeploymentsFinishedMetric = "mantis_deployments_finished_total"
	// DeploymentDurationMetric times deployments from start to end, by final status.
	DeploymentDurationMetric = "mantis_deployment_duration_seconds"
	// StepTargetsMetric is the number of targets of each step started.
	StepTargetsMetric = "mantis_deployment_step_targets"
)

// deploymentMetrics count what the deployment activities record. Each replica
// counts the activities it ran; an activity retried after it committed is
// counted again, which is rare.
type deploymentMetrics struct {
	started     prometheus.Counter
	finished    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	stepTargets prometheus.Histogram
}

func newDeploymentMetrics(reg prometheus.Registerer) *deploymentMetrics {
	m := &deploymentMetrics{
		started: prometheus.NewCounter(prometheus.CounterOpts{
			Name: DeploymentsStartedMetric, Help: "Deployments that started running (targets resolved, steps recorded).",
		}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: DeploymentsFinishedMetric, Help: "Deployments that ended, by final status.",
		}, []string{"status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: DeploymentDurationMetric, Help: "Time from a deployment's start to its end, by final status.",
			Buckets: []float64{1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400},
		}, []string{"status"}),
		stepTargets: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: StepTargetsMetric, Help: "Targets of each step started.",
			Buckets: []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000},
		}),
	}
	reg.MustRegister(m.started, m.finished, m.duration, m.stepTargets)
	return m
}

func (m *Metrics) deploymentStarted() {
	if m == nil {
		return
	}
	m.deployments.started.Inc()
}

func (m *Metrics) stepStarted(targets int) {
	if m == nil {
		return
	}
	m.deployments.stepTargets.Observe(float64(targets))
}

// deploymentFinished counts deployment id's end with its final status and times
// it; a run time that cannot be read is not observed.
func (m *Metrics) deploymentFinished(ctx context.Context, db schema.DB, id uuid.UUID, final string) {
	if m == nil {
		return
	}
	m.deployments.finished.WithLabelValues(final).Inc()
	if d, err := schema.DeploymentRunTime(ctx, db, id); err == nil {
		m.deployments.duration.WithLabelValues(final).Observe(d.Seconds())
	}
}
