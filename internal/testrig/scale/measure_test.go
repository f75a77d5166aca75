package scale_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
	"github.com/mantis-deploy/mantis/internal/testrig/scale"
	"github.com/mantis-deploy/mantis/schema"
)

// Pace of the measurement.
const (
	enqueueBatch = 500
	drainPoll    = 250 * time.Millisecond
	connsEvery   = time.Second
	// loadCommand is the trivial command of every request.
	loadCommand    = "true"
	commandTimeout = 60 * time.Second
	// assignTimeout bounds the wait for the agents' targets to be assigned: a fleet
	// of 200 processes on a loaded machine takes minutes.
	assignTimeout = 3 * time.Minute
)

// measureSize starts a cluster of n replicas, measures it idle and then draining
// the workload, and returns the figures, what is worth knowing about the fleet, and
// what went wrong.
func measureSize(t *testing.T, servers *faultenv.Servers, n int, set settings) (scale.Size, []string, []string) {
	c, targets := faultenv.StartFleet(t, servers, faultenv.Options{Replicas: n, Thoraxes: thoraxes, PollAgents: set.agents, Metrics: true}, assignTimeout)
	require.NotEmpty(t, targets, "no agent's target was assigned within %s", assignTimeout)
	// The scale run measures the dispatch path with several requests per target, not
	// the per-target concurrency default (one running command).
	_, err := schema.SetLimit(c.Ctx, c.Pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget,
		MaxRunning: schema.MaxLimitRunning}, "scale")
	require.NoError(t, err)
	size := scale.Size{Replicas: n, Thoraxes: thoraxes, Agents: len(targets), Requests: set.requests}
	var notes []string
	if len(targets) < set.agents {
		notes = append(notes, fmt.Sprintf("%d replica(s): %d of %d agents' targets were assigned within %s of the agents' start; the load went to those",
			n, len(targets), set.agents, assignTimeout))
	}
	admin, err := pgx.Connect(c.Ctx, servers.AdminURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	peaks := scale.NewConnPeaks(admin, config.ApplicationNamePrefix)
	sampling, stopSampling := context.WithCancel(c.Ctx)
	sampled := make(chan struct{})
	go func() { defer close(sampled); peaks.Run(sampling, connsEvery) }()

	idleStart := readCPU(t, c, servers)
	<-time.After(idleWindow) // a measurement window, not an ordering wait
	loadStart := readCPU(t, c, servers)
	size.IdleCPU, size.IdleWindow = sub(loadStart.cpu, idleStart.cpu), loadStart.at.Sub(idleStart.at)
	claimsBefore := claims(t, c)

	enqueue(t, c, targets, set.requests)
	drained := waitDrained(t, c, set.requests, set.window)
	loadEnd := readCPU(t, c, servers)
	size.LoadCPU, size.LoadWindow = sub(loadEnd.cpu, loadStart.cpu), loadEnd.at.Sub(loadStart.at)
	size.Claims = claims(t, c).Sub(claimsBefore)
	stopSampling()
	<-sampled
	size.PeakConns, err = peaks.Peaks()
	require.NoError(t, err)
	require.NoError(t, outcome(c, &size))

	var problems []string
	if !drained || size.Succeeded < size.Requests {
		problems = append(problems, fmt.Sprintf("%d replica(s): %d of %d requests succeeded within %s (%d ended otherwise)",
			n, size.Succeeded, size.Requests, set.window, size.NotSucceeded))
	}
	return size, notes, problems
}

// cpuReading is every tier's CPU at one moment.
type cpuReading struct {
	at  time.Time
	cpu map[scale.Tier]time.Duration
}

// readCPU adds up each tier's CPU: the process trees of the cluster's processes and
// of the servers, and the test process itself.
func readCPU(t *testing.T, c *faultenv.Cluster, s *faultenv.Servers) cpuReading {
	t.Helper()
	procs, err := scale.ReadSnapshot()
	require.NoError(t, err)
	own, err := scale.OwnCPU()
	require.NoError(t, err)
	r := cpuReading{at: time.Now(), cpu: map[scale.Tier]time.Duration{scale.TierHarness: own}}
	for _, m := range c.Mandibles {
		r.cpu[scale.TierMandible] += procs.Tree(m.Pid())
	}
	for _, th := range c.Thoraxes {
		r.cpu[scale.TierThorax] += procs.Tree(th.Pid())
	}
	for _, a := range c.Agents {
		r.cpu[scale.TierAgents] += procs.Tree(a.Pid())
	}
	for tier, server := range map[scale.Tier]devstack.Server{scale.TierPostgres: devstack.ServerPostgres,
		scale.TierRabbitMQ: devstack.ServerRabbitMQ, scale.TierTemporal: devstack.ServerTemporal} {
		pid := s.Pid(server)
		require.NotZero(t, pid, "%s is not running", server)
		r.cpu[tier] = procs.Tree(pid)
	}
	return r
}

func sub(after, before map[scale.Tier]time.Duration) map[scale.Tier]time.Duration {
	out := map[scale.Tier]time.Duration{}
	for t, v := range after {
		out[t] = v - before[t]
	}
	return out
}

// claims sums every replica's claim counters.
func claims(t *testing.T, c *faultenv.Cluster) scale.Claims {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var sum scale.Claims
	for _, m := range c.Mandibles {
		got, err := scale.ScrapeClaims(c.Ctx, client, "http://"+m.HTTPAddr+"/metrics")
		require.NoError(t, err)
		sum = sum.Add(got)
	}
	return sum
}

// enqueue writes n requests of `true`, spread over the targets, in batches as fast
// as the database takes them.
func enqueue(t *testing.T, c *faultenv.Cluster, targets []string, n int) {
	t.Helper()
	run := fmt.Sprintf("scale-%d", os.Getpid())
	for first := 0; first < n; first += enqueueBatch {
		batch := make([]schema.NewDispatchRequest, 0, enqueueBatch)
		for i := first; i < min(first+enqueueBatch, n); i++ {
			batch = append(batch, schema.NewDispatchRequest{IdempotencyKey: fmt.Sprintf("%s-%d", run, i),
				Target: targets[i%len(targets)], Command: loadCommand, Timeout: commandTimeout, Priority: domain.PriorityNormal})
		}
		_, err := schema.EnqueueDispatchRequests(c.Ctx, c.Pool, batch)
		require.NoError(t, err, "enqueueing dispatch requests")
	}
}

// waitDrained polls until every request's command ended, or window passes; it
// reports whether all ended.
func waitDrained(t *testing.T, c *faultenv.Cluster, n int, window time.Duration) bool {
	t.Helper()
	deadline := time.Now().Add(window)
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for range tick.C {
		var ended int
		err := c.Pool.QueryRow(c.Ctx, `SELECT count(DISTINCT dispatch_request_id) FROM command_queue
			WHERE deployment_id IS NULL AND status IN ('succeeded', 'failed', 'cancelled', 'lost')`).Scan(&ended)
		require.NoError(t, err, "counting ended commands")
		if ended >= n {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
	return false
}

// outcomeSQL takes, over the requests of no deployment, the successes, the drain
// (first enqueue to last success) and the enqueue-to-result percentiles.
const outcomeSQL = `
SELECT count(c.finished_at),
       count(*) FILTER (WHERE c.finished_at IS NULL AND EXISTS (SELECT 1 FROM command_queue q
           WHERE q.dispatch_request_id = r.id AND q.status IN ('failed', 'cancelled', 'lost'))),
       coalesce(extract(epoch FROM max(c.finished_at) - min(r.created_at)), 0),
       coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM c.finished_at - r.created_at)), 0),
       coalesce(percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM c.finished_at - r.created_at)), 0)
FROM pending_dispatch_requests r
LEFT JOIN LATERAL (
    SELECT q.finished_at FROM command_queue q
    WHERE q.dispatch_request_id = r.id AND q.status = 'succeeded'
    ORDER BY q.finished_at LIMIT 1
) c ON true
WHERE r.deployment_id IS NULL`

func outcome(c *faultenv.Cluster, s *scale.Size) error {
	var drain, p50, p99 float64
	if err := c.Pool.QueryRow(c.Ctx, outcomeSQL).Scan(&s.Succeeded, &s.NotSucceeded, &drain, &p50, &p99); err != nil {
		return fmt.Errorf("measuring the drain: %w", err)
	}
	s.Drain, s.P50, s.P99 = seconds(drain), seconds(p50), seconds(p99)
	return nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
