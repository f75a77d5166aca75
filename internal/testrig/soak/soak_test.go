package soak_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
	"github.com/mantis-deploy/mantis/internal/testrig/soak"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// Environment of the soak; `make soak` sets them.
const (
	// DurationVar is how long the load runs (a Go duration); the soak is skipped
	// without it.
	DurationVar = "MANTIS_SOAK_DURATION"
	// RateVar overrides the dispatch requests per second.
	RateVar = "MANTIS_SOAK_RATE"
	// ReportVar names a file to write the report to.
	ReportVar = "MANTIS_SOAK_REPORT"
)

// Shape of the soak.
const (
	defaultRate = 100
	// deployEvery is the deployment rate: the fault suite's workload (2 steps on 4
	// targets) at a pace the Temporal dev server keeps on 2 cores next to the
	// dispatch load.
	deployEvery  = 2 * time.Second
	deploySleep  = 100 * time.Millisecond
	sampleEvery  = 5 * time.Second
	drainTimeout = 3 * time.Minute
	// drainedSamples are taken once the load has drained.
	drainedSamples = 3
	// sampledAgents is how many agents the report follows.
	sampledAgents = 3
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// settings reads the soak's environment.
func settings(t *testing.T) (time.Duration, int) {
	t.Helper()
	raw := os.Getenv(DurationVar)
	if raw == "" {
		t.Skipf("long run: set %s (make soak)", DurationVar)
	}
	d, err := time.ParseDuration(raw)
	require.NoError(t, err, "%s", DurationVar)
	require.GreaterOrEqual(t, d, 3*time.Minute, "%s: minute %d is the baseline, so at least 3m", DurationVar, soak.BaselineMinute)
	rate := defaultRate
	if v := os.Getenv(RateVar); v != "" {
		rate, err = strconv.Atoi(v)
		require.NoError(t, err, "%s", RateVar)
		require.Positive(t, rate, "%s", RateVar)
	}
	return d.Truncate(time.Minute), rate
}

func TestSoak(t *testing.T) {
	duration, rate := settings(t)
	servers, err := faultenv.StartServers(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = servers.Close() })
	c := faultenv.StartCluster(t, servers, faultenv.Options{
		Replicas: 2, Thoraxes: 2, PollAgents: 6, ListenAgents: 4, Metrics: true,
	})
	// The soak holds a rate of dispatch requests over few targets: it measures the
	// dispatch path, not the per-target concurrency default (one running command).
	_, err = schema.SetLimit(c.Ctx, c.Pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget,
		MaxRunning: schema.MaxLimitRunning}, "soak")
	require.NoError(t, err)
	machine := machine()
	cpuGroups := cpuGroups(c, servers)
	admin, err := pgx.Connect(c.Ctx, servers.AdminURL())
	require.NoError(t, err)
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	require.NoError(t, soak.ResetStatements(c.Ctx, admin))

	start := time.Now()
	cpuBefore := soak.ReadCPU(cpuGroups)
	ctx, stop := context.WithTimeout(context.Background(), duration)
	defer stop()
	sampler := soak.NewSampler(followed(c), c.Pool, start)
	sampled := make(chan struct{})
	go func() { defer close(sampled); sampler.Run(ctx, sampleEvery) }()
	load := &soak.Load{URLs: apiURLs(c), Token: faultenv.APIToken, Targets: c.TargetNames(), Rate: rate}
	loaded := make(chan struct{})
	go func() { defer close(loaded); load.Run(ctx) }()
	deployments := c.StartWorkload(faultenv.WorkloadOptions{Interval: deployEvery, CommandSleep: deploySleep})
	<-ctx.Done()
	cpuAfter, wall := soak.ReadCPU(cpuGroups), time.Since(start)
	deployments.Stop()
	<-loaded
	<-sampled
	drained := waitDrained(t, c)
	for range drainedSamples {
		sampler.SampleOnce(c.Ctx)
		<-time.After(sampleEvery)
	}

	minutes := int(duration / time.Minute)
	report := soak.Report{Date: start, Machine: machine, Duration: duration, Rate: rate, DeployEvery: deployEvery, Load: load.Totals()}
	for _, p := range followed(c) {
		ms := soak.Minutes(sampler.Samples(p.Name), minutes)
		pr := soak.ProcessReport{Name: p.Name, Minutes: ms, Failures: sampler.Failures(p.Name), Verdicts: soak.Judge(p.Name, ms)}
		if d, ok := soak.Since(sampler.Samples(p.Name), duration); ok {
			pr.Drained = &d
		}
		report.Processes = append(report.Processes, pr)
	}
	report.Latency, err = soak.DispatchLatency(c.Ctx, c.Pool, start, minutes)
	require.NoError(t, err)
	report.Deployments, err = soak.Deployments(c.Ctx, c.Pool, start, minutes)
	require.NoError(t, err)
	report.CPU = soak.CPUUses(cpuGroups, cpuBefore, cpuAfter, wall, completedDuring(report.Latency))
	rework, err := soak.ReadRework(c.Ctx, c.Pool, start)
	require.NoError(t, err)
	rework.Statements, err = soak.ReadStatements(c.Ctx, admin, c.Pool.Config().ConnConfig.Database)
	require.NoError(t, err)
	report.Rework = &rework
	report.Problems = problems(report, drained)
	out := report.Markdown()
	t.Logf("\n%s", out)
	if path := os.Getenv(ReportVar); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
	}
	for _, v := range report.NotFlat() {
		t.Errorf("not flat: %s", v)
	}
	require.Empty(t, report.Problems)
}

// followed is every replica and Thorax, and the first sampledAgents agents.
func followed(c *faultenv.Cluster) []soak.Process {
	var out []soak.Process
	for _, m := range c.Mandibles {
		out = append(out, soak.Process{Name: m.ID, Pid: m.Pid, MetricsURL: "http://" + m.HTTPAddr + "/metrics",
			AppName: config.Mandible{ReplicaID: m.ID}.ApplicationName()})
	}
	for _, th := range c.Thoraxes {
		out = append(out, soak.Process{Name: th.Name, Pid: th.Pid, MetricsURL: "http://" + th.MetricsAddr + "/metrics"})
	}
	for _, a := range c.Agents[:min(sampledAgents, len(c.Agents))] {
		out = append(out, soak.Process{Name: "agent " + a.Name, Pid: a.Pid, MetricsURL: "http://" + a.MetricsAddr + "/metrics"})
	}
	return out
}

// cpuGroups are the processes whose CPU the report adds up: the cluster's processes by
// kind, and each server with the processes it forks.
func cpuGroups(c *faultenv.Cluster, s *faultenv.Servers) []soak.CPUGroup {
	var mandibles, thoraxes, agents []func() int
	for _, m := range c.Mandibles {
		mandibles = append(mandibles, m.Pid)
	}
	for _, th := range c.Thoraxes {
		thoraxes = append(thoraxes, th.Pid)
	}
	for _, a := range c.Agents {
		agents = append(agents, a.Pid)
	}
	server := func(srv devstack.Server) []func() int { return []func() int{func() int { return s.Pid(srv) }} }
	return []soak.CPUGroup{
		{Name: "Mandible replicas", Pids: mandibles},
		{Name: "Thorax instances", Pids: thoraxes},
		{Name: "agents", Pids: agents},
		{Name: "PostgreSQL", Pids: server(devstack.ServerPostgres)},
		{Name: "RabbitMQ", Pids: server(devstack.ServerRabbitMQ)},
		{Name: "Temporal", Pids: server(devstack.ServerTemporal)},
	}
}

// completedDuring counts the dispatch requests that succeeded while the load ran.
func completedDuring(minutes []soak.LatencyMinute) int {
	n := 0
	for _, l := range minutes {
		n += l.Completed
	}
	return n
}

func apiURLs(c *faultenv.Cluster) []string {
	out := make([]string, len(c.Mandibles))
	for i, m := range c.Mandibles {
		out[i] = "http://" + m.HTTPAddr
	}
	return out
}

// waitDrained waits until nothing of the load is left to run; it reports whether
// that happened within drainTimeout.
func waitDrained(t *testing.T, c *faultenv.Cluster) bool {
	t.Helper()
	return assert.Eventually(t, func() bool {
		var open int
		err := c.Pool.QueryRow(c.Ctx, `SELECT
			(SELECT count(*) FROM pending_dispatch_requests WHERE status IN ('pending', 'processing')) +
			(SELECT count(*) FROM command_queue WHERE status IN ('queued', 'running')) +
			(SELECT count(*) FROM deployments WHERE status IN ('pending', 'running'))`).Scan(&open)
		return err == nil && open == 0
	}, drainTimeout, time.Second, "the load did not drain within %s", drainTimeout)
}

// problems lists what went wrong besides flatness: requests refused or lost on
// the way, requests or deployments that did not succeed, a load that did not drain.
func problems(r soak.Report, drained bool) []string {
	var out []string
	if r.Load.Refused+r.Load.Failed > 0 {
		out = append(out, fmt.Sprintf("the API did not take %d requests (last: %s)", r.Load.Refused+r.Load.Failed, r.Load.LastProblem))
	}
	for _, l := range r.Latency {
		if l.NotSucceeded > 0 {
			out = append(out, fmt.Sprintf("minute %d: %d of %d dispatch requests did not succeed", l.Index, l.NotSucceeded, l.Enqueued))
		}
	}
	for _, d := range r.Deployments {
		if d.Failed+d.Unended > 0 {
			out = append(out, fmt.Sprintf("minute %d: %d deployments failed, %d did not end", d.Index, d.Failed, d.Unended))
		}
	}
	if !drained {
		out = append(out, fmt.Sprintf("work was still open %s after the load stopped", drainTimeout))
	}
	return out
}

// machine describes where the soak ran: cores and the load average before it.
func machine() string {
	avg, _ := os.ReadFile("/proc/loadavg")
	fields := strings.Fields(string(avg))
	if len(fields) >= 3 {
		return fmt.Sprintf("%d cores, load average %s %s %s at the start", runtime.NumCPU(), fields[0], fields[1], fields[2])
	}
	return fmt.Sprintf("%d cores", runtime.NumCPU())
}
