package e2e_test

import (
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// The round trip on the broker path (`make bench BENCH=RoundTripNudges`): enqueue, the
// dispatcher's claim and delivery with its nudge over RabbitMQ (TLS), Thorax's claim on
// the nudge, the hand-off to the agent, the run of `true`, and the stored result, for a
// poll agent and for a listen agent. BenchmarkExecRoundTrip measures the same without
// a broker, on Thorax's polling tick.

const (
	// nudgeRoundTrips is how many commands each mode runs, one after another.
	nudgeRoundTrips = 40
	// nudgeStoredPoll is how often the benchmark looks for the stored result: the
	// "stored" leg is late by half of it on average.
	nudgeStoredPoll = time.Millisecond
	// nudgeP50Goal and nudgeP99Goal are the goals of enqueue -> result stored.
	nudgeP50Goal = 50 * time.Millisecond
	nudgeP99Goal = 150 * time.Millisecond
)

// nudgeLegs are the samples of each leg of the round trip.
type nudgeLegs struct {
	total, written, claimed, handed, run, stored []time.Duration
}

// BenchmarkExecRoundTripNudges runs nudgeRoundTrips commands one after another through
// one Mandible replica, one Thorax and one agent (processes; the fault suite's cluster,
// whose links pass through loopback proxies) with the broker on, in poll mode and in
// listen mode, and reports p50 and p99 of each leg: enqueue -> claimed by Thorax (the
// dispatcher's claim, delivery and nudge, and Thorax's claim), claimed -> the agent
// started the command (hand-off), the run, and finished -> result stored.
func BenchmarkExecRoundTripNudges(b *testing.B) {
	legs := map[string]*nudgeLegs{schema.ModePoll: {}, schema.ModeListen: {}}
	for range b.N {
		for _, mode := range []string{schema.ModePoll, schema.ModeListen} {
			scenario(b, "round-trip-nudges-"+mode, func(t *testing.T) { legs[mode].add(runNudgedRoundTrips(t, mode)) })
		}
	}
	b.ReportMetric(0, "ns/op")
	table := [][]string{{"round trip of `true` with nudges", "p50 ms", "p99 ms", "max ms", "goal"}}
	for _, mode := range []string{schema.ModePoll, schema.ModeListen} {
		l := legs[mode]
		l.sort()
		b.ReportMetric(ms(percentile(l.total, 0.50)), mode+"-p50-ms")
		b.ReportMetric(ms(percentile(l.total, 0.99)), mode+"-p99-ms")
		for _, r := range []struct {
			name    string
			samples []time.Duration
			goal    string
		}{
			{mode + ": enqueue -> result stored", l.total, fmt.Sprintf("p50 < %s, p99 < %s", nudgeP50Goal, nudgeP99Goal)},
			{"  enqueue -> command written (dispatcher claim + delivery)", l.written, ""},
			{"  enqueue -> claimed by Thorax (+ nudge, Thorax's claim)", l.claimed, ""},
			{"  claimed -> started on the agent (hand-off)", l.handed, ""},
			{"  agent run of `true`", l.run, ""},
			{"  finished -> result stored", l.stored, ""},
		} {
			table = append(table, []string{r.name, fmt.Sprintf("%.1f", ms(percentile(r.samples, 0.50))),
				fmt.Sprintf("%.1f", ms(percentile(r.samples, 0.99))), fmt.Sprintf("%.1f", ms(r.samples[len(r.samples)-1])), r.goal})
		}
	}
	logTable(b, table)
}

func (l *nudgeLegs) add(o nudgeLegs) {
	l.total = append(l.total, o.total...)
	l.written = append(l.written, o.written...)
	l.claimed = append(l.claimed, o.claimed...)
	l.handed = append(l.handed, o.handed...)
	l.run = append(l.run, o.run...)
	l.stored = append(l.stored, o.stored...)
}

func (l *nudgeLegs) sort() {
	for _, s := range [][]time.Duration{l.total, l.written, l.claimed, l.handed, l.run, l.stored} {
		slices.Sort(s)
	}
}

// sharedServers is the servers of the stack MANTIS_TEST_STACK_ENV names, as the fault
// suite's cluster takes them: a database and a vhost of the test's own on them.
func sharedServers(t *testing.T) *faultenv.Servers {
	t.Helper()
	path := os.Getenv(testenv.StackEnvVar)
	if path == "" {
		t.Skipf("%s is not set: run under make bench or mantisctl dev exec", testenv.StackEnvVar)
	}
	env, err := devstack.ReadEnv(path)
	require.NoError(t, err)
	return &faultenv.Servers{Stack: &devstack.Stack{Env: env}}
}

// runNudgedRoundTrips starts a cluster with one agent of mode and runs the round trips.
func runNudgedRoundTrips(t *testing.T, mode string) nudgeLegs {
	o := faultenv.Options{Replicas: 1, Thoraxes: 1, PollAgents: 1}
	if mode == schema.ModeListen {
		o = faultenv.Options{Replicas: 1, Thoraxes: 1, ListenAgents: 1}
	}
	c := faultenv.StartCluster(t, sharedServers(t), o)
	target := c.TargetNames()[0]
	for range 3 { // warm up the dispatcher, the nudge path, Thorax and the agent
		nudgedRoundTrip(t, c, target)
	}
	var l nudgeLegs
	for range nudgeRoundTrips {
		l.add(nudgedRoundTrip(t, c, target))
	}
	return l
}

// nudgedRoundTrip enqueues one request of `true` on target and waits for its stored
// result, returning one sample of each leg.
func nudgedRoundTrip(t *testing.T, c *faultenv.Cluster, target string) nudgeLegs {
	t.Helper()
	enqueued := time.Now()
	out, err := schema.EnqueueDispatchRequests(c.Ctx, c.Pool, []schema.NewDispatchRequest{{
		IdempotencyKey: uniqueName("nudge"), Target: target, Command: "true", Priority: "normal", Timeout: time.Minute,
	}})
	require.NoError(t, err)
	var (
		id                                  uuid.UUID
		status                              string
		written, claimed, started, finished *time.Time
		stored                              time.Time
	)
	deadline := time.Now().Add(commandTimeout)
	tick := time.NewTicker(nudgeStoredPoll)
	defer tick.Stop()
	for {
		err := c.Pool.QueryRow(c.Ctx, `SELECT id, status, created_at, claimed_at, started_at, finished_at FROM command_queue
			WHERE dispatch_request_id = $1 ORDER BY dispatch_attempt DESC LIMIT 1`, out[0].ID).
			Scan(&id, &status, &written, &claimed, &started, &finished)
		if err == nil && (status == domain.CommandSucceeded || status == domain.CommandFailed) {
			stored = time.Now()
			break
		}
		require.True(t, time.Now().Before(deadline), "request %s not stored after %s", out[0].ID, commandTimeout)
		<-tick.C
	}
	require.Equal(t, domain.CommandSucceeded, status, "command %s", id)
	require.NotNil(t, claimed)
	require.NotNil(t, started)
	require.NotNil(t, finished)
	return nudgeLegs{
		total: []time.Duration{stored.Sub(enqueued)}, written: []time.Duration{written.Sub(enqueued)},
		claimed: []time.Duration{claimed.Sub(enqueued)}, handed: []time.Duration{started.Sub(*claimed)},
		run: []time.Duration{finished.Sub(*started)}, stored: []time.Duration{stored.Sub(*finished)},
	}
}
