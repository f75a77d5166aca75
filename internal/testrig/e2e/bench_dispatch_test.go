package e2e_test

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"golang.org/x/sync/errgroup"

	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// The benchmarks below measure the dispatch path against real PostgreSQL and Temporal
// (`make bench`). Each b.N iteration runs a whole scenario on fresh databases, so the
// built-in ns/op (which would include creating databases and starting replicas) is
// suppressed: the figures are the custom metrics, and each benchmark logs them as a
// table next to the goal.

const (
	// batchSize is Mandible's default claim batch, used by every side of a comparison.
	batchSize = 100
	// claimRows is how many pending rows each claim case drains.
	claimRows = 20000
	// e2eRequests is how many requests (or River jobs) each end-to-end case drains.
	e2eRequests = 10000
	// latencyRate and latencyRequests give about ten seconds of arrivals at 100/s.
	latencyRate     = 100
	latencyRequests = 1000
	// rssRows is the queue the busy replica of BenchmarkMandibleRSS works on, and
	// rssFailedDeliveries how many deliveries it must have failed before it is measured.
	rssRows             = 100000
	rssFailedDeliveries = 10000
	// drainPoll is how often a timed drain's completion is checked.
	drainPoll = 20 * time.Millisecond
)

// BenchmarkDispatchClaim compares schema.ClaimPending with the textbook SKIP LOCKED
// claim at the same batch size, each draining claimRows pending rows with 1 and with 3
// concurrent claimers on connections of their own. Goals: ClaimPending at least 70% of
// the bare rate, and under 5% of its candidates lost to other claimers at 3.
func BenchmarkDispatchClaim(b *testing.B) {
	for _, claimers := range []int{1, 3} {
		b.Run(fmt.Sprintf("claimers=%d", claimers), func(b *testing.B) {
			var pending, bare claimRun
			for range b.N {
				scenario(b, "claim-pending", func(t *testing.T) { pending.add(runClaim(t, claimers, claimWithClaimPending)) })
				scenario(b, "bare-skip-locked", func(t *testing.T) { bare.add(runClaim(t, claimers, claimBare)) })
			}
			ratio := pending.rate() / bare.rate()
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(pending.rate(), "claimpending-rows/s")
			b.ReportMetric(bare.rate(), "bare-rows/s")
			b.ReportMetric(ratio, "ratio")
			b.ReportMetric(pending.wastedPercent(), "wasted%")
			logTable(b, [][]string{
				{"claim (batch 100)", "claimers", "rows/s", "wasted", "goal"},
				{"schema.ClaimPending", strconv.Itoa(claimers), fmt.Sprintf("%.0f", pending.rate()), fmt.Sprintf("%.2f%%", pending.wastedPercent()), "wasted < 5% at 3"},
				{"bare SKIP LOCKED", strconv.Itoa(claimers), fmt.Sprintf("%.0f", bare.rate()), "-", ""},
				{"ratio", "", fmt.Sprintf("%.2f", ratio), "", ">= 0.70"},
			})
		})
	}
}

// claimFunc claims up to batchSize rows for claimer and says how many it won and how
// many candidates it lost to other claimers.
type claimFunc func(ctx context.Context, conn *pgx.Conn, claimer string) (won, lost int, err error)

func claimWithClaimPending(ctx context.Context, conn *pgx.Conn, claimer string) (int, int, error) {
	res, err := schema.ClaimPending(ctx, conn, claimer, batchSize)
	return len(res.Claimed), res.Lost, err
}

// bareClaimSQL is the baseline: the textbook SKIP LOCKED claim in one statement, as
// ClaimPending is, without the eligibility filters (backoff, expiry), the claim epoch,
// the target join and the lost-candidate accounting. claimed_by and claimed_at are set
// because the table requires them of a processing row.
const bareClaimSQL = `
	UPDATE pending_dispatch_requests
	SET status = 'processing', claimed_by = $1, claimed_at = now()
	WHERE id IN (
	    SELECT id FROM pending_dispatch_requests
	    WHERE status = 'pending'
	    ORDER BY priority_rank, created_at
	    LIMIT $2
	    FOR UPDATE SKIP LOCKED)
	RETURNING id`

func claimBare(ctx context.Context, conn *pgx.Conn, claimer string) (int, int, error) {
	rows, err := conn.Query(ctx, bareClaimSQL, claimer, batchSize)
	if err != nil {
		return 0, 0, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	return len(ids), 0, err
}

// claimRun is what one or more claim drains measured.
type claimRun struct {
	rows, lost int
	elapsed    time.Duration
}

func (r *claimRun) add(o claimRun) {
	r.rows += o.rows
	r.lost += o.lost
	r.elapsed += o.elapsed
}

func (r claimRun) rate() float64 { return float64(r.rows) / r.elapsed.Seconds() }

// wastedPercent is the share of loaded candidates whose conditional update lost.
func (r claimRun) wastedPercent() float64 {
	if r.rows+r.lost == 0 {
		return 0
	}
	return 100 * float64(r.lost) / float64(r.rows+r.lost)
}

// runClaim drains claimRows freshly enqueued rows with claimers concurrent claimers and
// checks that every row was claimed once.
func runClaim(t *testing.T, claimers int, claim claimFunc) claimRun {
	f := setupDispatchFixture(t, 20)
	f.enqueue(t, claimRows, uniqueName("claim"))
	_, err := f.pool.Exec(f.ctx, `VACUUM ANALYZE pending_dispatch_requests`)
	require.NoError(t, err)
	conns := make([]*pgx.Conn, claimers)
	for i := range conns {
		conn, err := pgx.Connect(f.ctx, f.url)
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close(context.Background()) })
		conns[i] = conn
	}

	runs := make([]claimRun, claimers)
	var g errgroup.Group
	start := time.Now()
	for i, conn := range conns {
		g.Go(func() error {
			claimer := fmt.Sprintf("claimer-%d", i)
			for {
				won, lost, err := claim(f.ctx, conn, claimer)
				if err != nil {
					return fmt.Errorf("claiming as %s: %w", claimer, err)
				}
				// Nothing left that is not held by another claimer.
				if won+lost == 0 {
					return nil
				}
				runs[i].rows += won
				runs[i].lost += lost
			}
		})
	}
	require.NoError(t, g.Wait())
	total := claimRun{elapsed: time.Since(start)}
	for _, r := range runs {
		total.rows += r.rows
		total.lost += r.lost
	}
	require.Equal(t, claimRows, total.rows, "claimed rows")
	require.Equal(t, claimRows, f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE status = 'processing'`))
	require.Zero(t, f.count(t, `SELECT count(*) FROM pending_dispatch_requests WHERE claim_epoch > 1`), "a row was claimed twice")
	return total
}

// BenchmarkDispatchEndToEnd measures requests dispatched per second end to end (first
// enqueue until every request has its command_queue row) with 1 and 3 Mandible replicas
// as OS processes, against River draining as many no-op jobs with as many clients on
// the same PostgreSQL, at the same batch (MaxWorkers 100). River runs twice: with its
// default FetchCooldown (100 ms, which caps a client at MaxWorkers per cooldown), and
// with the shortest one, which the goal (Mandible at least 25% of River's rate) is
// measured against.
func BenchmarkDispatchEndToEnd(b *testing.B) {
	for _, replicas := range []int{1, 3} {
		b.Run(fmt.Sprintf("replicas=%d", replicas), func(b *testing.B) {
			var mandible, riverFast, riverDefault time.Duration
			for range b.N {
				scenario(b, "mandible", func(t *testing.T) { mandible += runMandibleDrain(t, replicas, nil, nil) })
				scenario(b, "river", func(t *testing.T) { riverFast += runRiverDrain(t, replicas, river.FetchCooldownMin) })
				scenario(b, "river-default", func(t *testing.T) { riverDefault += runRiverDrain(t, replicas, river.FetchCooldownDefault) })
			}
			rate := func(d time.Duration) float64 { return float64(e2eRequests*b.N) / d.Seconds() }
			row := func(name string, d time.Duration) []string {
				return []string{name, strconv.Itoa(replicas), strconv.Itoa(e2eRequests), seconds(d / time.Duration(b.N)), fmt.Sprintf("%.0f", rate(d)), fmt.Sprintf("%.2f", rate(mandible)/rate(d))}
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(rate(mandible), "mandible-req/s")
			b.ReportMetric(rate(riverFast), "river-jobs/s")
			b.ReportMetric(rate(riverDefault), "river-default-jobs/s")
			b.ReportMetric(rate(mandible)/rate(riverFast), "ratio")
			b.ReportMetric(rate(mandible)/rate(riverDefault), "ratio-default")
			logTable(b, [][]string{
				{"end to end", "processes", "drained", "seconds", "per second", "Mandible/this", "goal"},
				append(row("Mandible (enqueue -> command_queue)", mandible), ""),
				append(row("River, FetchCooldown 1ms (InsertMany -> completed)", riverFast), ">= 0.25"),
				append(row("River, default FetchCooldown 100ms", riverDefault), ""),
			})
		})
	}
}

// runMandibleDrain starts replicas, warms them up, then times e2eRequests from the first
// enqueue until each has its command_queue row. With nudges (a broker with Mantis's
// topology) the replicas publish a nudge for each command, with confirms, after its
// batch is written; the time then runs until every nudge is in its queue, which
// nudged reports.
func runMandibleDrain(t *testing.T, replicas int, nudges *testenv.Broker, nudged func() int) time.Duration {
	f := setupDispatchFixture(t, 20)
	prefix := uniqueName("e2e")
	for i := range replicas {
		startReplica(t, replicaOptions{ID: fmt.Sprintf("%s-%d", prefix, i), DatabaseURL: f.url, Temporal: f.temporal, Broker: nudges})
	}
	warmUp(t, f, replicas)

	start := time.Now()
	f.enqueue(t, e2eRequests, prefix)
	done := waitForCount(t, f.pool, 5*time.Minute, replicas+e2eRequests, `SELECT count(*) FROM command_queue`)
	require.Equal(t, replicas+e2eRequests, f.count(t, `SELECT count(*) FROM command_queue`), "one command per request")
	if nudged != nil {
		require.Eventually(t, func() bool { return nudged() >= replicas+e2eRequests }, time.Minute, drainPoll,
			"every command, warm-up included, has its nudge queued")
		done = time.Now()
	}
	return done.Sub(start)
}

// noopArgs is the River job of the comparison; noopWorker does nothing with it.
type noopArgs struct{}

func (noopArgs) Kind() string { return "mantis_bench_noop" }

type noopWorker struct{ river.WorkerDefaults[noopArgs] }

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// runRiverDrain starts River clients (each with a pool of its own, as Mandible replicas
// have) on a fresh database, warms them up, then times e2eRequests jobs from the first
// InsertMany until all are completed.
func runRiverDrain(t *testing.T, clients int, fetchCooldown time.Duration) time.Duration {
	ctx := context.Background()
	url := testenv.DatabaseURL(t)
	admin := openPool(t, url)
	migrator, err := rivermigrate.New(riverpgxv5.New(admin), nil)
	require.NoError(t, err)
	_, err = migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
	require.NoError(t, err)

	workers := river.NewWorkers()
	river.AddWorker(workers, noopWorker{})
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var inserter *river.Client[pgx.Tx]
	for range clients {
		riverClient, err := river.NewClient(riverpgxv5.New(openPool(t, url)), &river.Config{
			Queues:        map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: batchSize}},
			FetchCooldown: fetchCooldown,
			Workers:       workers,
			Logger:        logger,
		})
		require.NoError(t, err)
		require.NoError(t, riverClient.Start(ctx))
		t.Cleanup(func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = riverClient.Stop(stopCtx)
		})
		if inserter == nil {
			inserter = riverClient
		}
	}

	insert := func(n int) {
		jobs := make([]river.InsertManyParams, n)
		for i := range jobs {
			jobs[i] = river.InsertManyParams{Args: noopArgs{}}
		}
		// In statements of 1,000, as dispatchFixture.enqueue writes requests.
		for chunk := range slices.Chunk(jobs, 1000) {
			_, err := inserter.InsertMany(ctx, chunk)
			require.NoError(t, err)
		}
	}
	const completed = `SELECT count(*) FROM river_job WHERE state = 'completed'`
	insert(clients)
	waitForCount(t, admin, time.Minute, clients, completed)

	start := time.Now()
	insert(e2eRequests)
	done := waitForCount(t, admin, 5*time.Minute, clients+e2eRequests, completed)
	return done.Sub(start)
}

// BenchmarkDispatchLatency measures enqueue-to-dispatch latency (dispatched_at -
// created_at, both from the database clock) with one replica while requests arrive one
// by one at 100/s for about ten seconds. Goal: p99 under 500 ms. The latency is split at
// claimed_at into the wait for a claim and the delivery, and the claims are counted, to
// show where the time goes.
func BenchmarkDispatchLatency(b *testing.B) {
	var run latencyRun
	for range b.N {
		scenario(b, "latency", func(t *testing.T) { run.add(runLatency(t)) })
	}
	for _, s := range [][]time.Duration{run.total, run.claimWait, run.delivery} {
		slices.Sort(s)
	}
	p50, p99, worst := percentile(run.total, 0.50), percentile(run.total, 0.99), run.total[len(run.total)-1]
	perBatch := float64(len(run.total)) / float64(run.batches)
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(run.arrivals/float64(b.N), "arrivals/s")
	b.ReportMetric(ms(p50), "p50-ms")
	b.ReportMetric(ms(p99), "p99-ms")
	b.ReportMetric(ms(worst), "max-ms")
	b.ReportMetric(perBatch, "requests/batch")
	table := [][]string{{"enqueue -> dispatch, 1 replica", "p50 ms", "p99 ms", "max ms", "goal"}}
	for _, r := range []struct {
		name    string
		samples []time.Duration
		goal    string
	}{
		{"created -> dispatched", run.total, "p99 < 500 ms"},
		{"  created -> claimed", run.claimWait, ""},
		{"  claimed -> dispatched", run.delivery, ""},
	} {
		table = append(table, []string{r.name, fmt.Sprintf("%.0f", ms(percentile(r.samples, 0.50))),
			fmt.Sprintf("%.0f", ms(percentile(r.samples, 0.99))), fmt.Sprintf("%.0f", ms(r.samples[len(r.samples)-1])), r.goal})
	}
	table = append(table, []string{fmt.Sprintf("%d requests at %.1f/s in %d claims (%.1f per claim)",
		len(run.total), run.arrivals/float64(b.N), run.batches, perBatch), "", "", "", ""})
	h := run.temporal
	table = append(table,
		[]string{fmt.Sprintf("dispatcher history: %d wake signals, %d workflow tasks (mean wait %.0f ms)",
			h.signals, h.workflowTasks, ms(mean(h.workflowTaskWait, h.workflowTasks))), "", "", "", ""},
		[]string{fmt.Sprintf("  %d activities (mean wait %.0f ms, mean run %.0f ms)",
			h.activities, ms(mean(h.activityWait, h.activities)), ms(mean(h.activityRun, h.activities))), "", "", "", ""})
	logTable(b, table)
}

// latencyRun is what one or more latency runs measured, per request.
type latencyRun struct {
	total, claimWait, delivery []time.Duration
	batches                    int
	arrivals                   float64
	temporal                   dispatcherHistory
}

func (r *latencyRun) add(o latencyRun) {
	r.total = append(r.total, o.total...)
	r.claimWait = append(r.claimWait, o.claimWait...)
	r.delivery = append(r.delivery, o.delivery...)
	r.batches += o.batches
	r.arrivals += o.arrivals
	r.temporal.add(o.temporal)
}

// runLatency enqueues latencyRequests requests one at a time at latencyRate per second
// and measures each one's way to dispatch.
func runLatency(t *testing.T) latencyRun {
	f := setupDispatchFixture(t, 20)
	prefix := uniqueName("latency")
	startReplica(t, replicaOptions{ID: prefix, DatabaseURL: f.url, Temporal: f.temporal})
	warmUp(t, f, 1)

	interval := time.Second / latencyRate
	start := time.Now()
	for i := range latencyRequests {
		// Paced against the start, so a slow enqueue is caught up rather than lowering the rate.
		if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
			time.Sleep(wait)
		}
		_, err := schema.EnqueueDispatchRequests(f.ctx, f.pool, []schema.NewDispatchRequest{{
			IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i),
			Target:         f.targets[i%len(f.targets)],
			Command:        "true",
			Priority:       domain.Priorities[i%len(domain.Priorities)],
		}})
		require.NoError(t, err)
	}
	run := latencyRun{arrivals: float64(latencyRequests) / time.Since(start).Seconds()}
	done := waitForCount(t, f.pool, 2*time.Minute, latencyRequests,
		`SELECT count(*) FROM pending_dispatch_requests WHERE status = 'dispatched' AND starts_with(idempotency_key, $1)`, prefix+"-")

	rows, err := f.pool.Query(f.ctx, `
		SELECT dispatched_at - created_at, claimed_at - created_at, dispatched_at - claimed_at
		FROM pending_dispatch_requests
		WHERE status = 'dispatched' AND starts_with(idempotency_key, $1)`, prefix+"-")
	require.NoError(t, err)
	var total, claimWait, delivery time.Duration
	_, err = pgx.ForEachRow(rows, []any{&total, &claimWait, &delivery}, func() error {
		run.total = append(run.total, total)
		run.claimWait = append(run.claimWait, claimWait)
		run.delivery = append(run.delivery, delivery)
		return nil
	})
	require.NoError(t, err)
	require.Len(t, run.total, latencyRequests)
	// claimed_at is stamped once per claim statement, so distinct values count the claims.
	run.batches = f.count(t, `
		SELECT count(DISTINCT claimed_at) FROM pending_dispatch_requests
		WHERE status = 'dispatched' AND starts_with(idempotency_key, $1)`, prefix+"-")
	run.temporal = readDispatcherHistory(t, f.temporal, prefix, start, done)
	return run
}

// dispatcherHistory is what a dispatcher workflow's history shows of a time window: the
// Temporal side of the claim rounds.
type dispatcherHistory struct {
	signals, workflowTasks, activities int
	// Summed over the window's tasks: schedule-to-start is time waiting in Temporal,
	// start-to-close is time running in the replica.
	workflowTaskWait, activityWait, activityRun time.Duration
}

func (h *dispatcherHistory) add(o dispatcherHistory) {
	h.signals += o.signals
	h.workflowTasks += o.workflowTasks
	h.activities += o.activities
	h.workflowTaskWait += o.workflowTaskWait
	h.activityWait += o.activityWait
	h.activityRun += o.activityRun
}

// readDispatcherHistory reads the current run of replica's dispatcher workflow and sums
// what happened in it between from and to. A run lasts 200 claim rounds, far more than
// the latency window takes.
func readDispatcherHistory(t *testing.T, server testenv.Temporal, replica string, from, to time.Time) dispatcherHistory {
	t.Helper()
	ctx := context.Background()
	c, err := client.DialContext(ctx, client.Options{
		HostPort:  server.Address,
		Namespace: server.Namespace,
		Logger:    tlog.NewStructuredLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))),
	})
	require.NoError(t, err)
	defer c.Close()
	var h dispatcherHistory
	scheduled := map[int64]time.Time{}
	started := map[int64]time.Time{}
	events := c.GetWorkflowHistory(ctx, workflows.DispatcherWorkflowID(replica), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for events.HasNext() {
		e, err := events.Next()
		require.NoError(t, err)
		at := e.GetEventTime().AsTime()
		if at.Before(from) || at.After(to) {
			continue
		}
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			h.signals++
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[e.GetEventId()] = at
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			if s, ok := scheduled[e.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()]; ok {
				h.workflowTasks++
				h.workflowTaskWait += at.Sub(s)
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			if s, ok := scheduled[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()]; ok {
				h.activityWait += at.Sub(s)
				started[e.GetActivityTaskStartedEventAttributes().GetScheduledEventId()] = at
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if s, ok := started[e.GetActivityTaskCompletedEventAttributes().GetScheduledEventId()]; ok {
				h.activities++
				h.activityRun += at.Sub(s)
			}
		}
	}
	return h
}

// BenchmarkMandibleRSS compares the resident memory of a replica working on 100,000
// pending rows with that of an idle replica on an empty database, both measured once
// the busy one has failed rssFailedDeliveries deliveries. Its targets have no live
// Thorax, so every delivery fails and the rows go back to pending with a backoff: the
// replica keeps claiming full batches for as long as it runs.
func BenchmarkMandibleRSS(b *testing.B) {
	var idle, busy memory
	var busyFor time.Duration
	for range b.N {
		scenario(b, "rss", func(t *testing.T) {
			i, u, d := runRSS(t)
			idle, busy, busyFor = idle.max(i), busy.max(u), max(busyFor, d)
		})
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(mib(idle.rss), "idle-MiB")
	b.ReportMetric(mib(busy.rss), "busy-MiB")
	b.ReportMetric(mib(busy.peak), "busy-peak-MiB")
	b.ReportMetric(float64(busy.rss)/float64(idle.rss), "ratio")
	logTable(b, [][]string{
		{"Mandible RSS", "pending rows", "VmRSS MiB", "VmHWM MiB"},
		{"idle replica", "0", fmt.Sprintf("%.1f", mib(idle.rss)), fmt.Sprintf("%.1f", mib(idle.peak))},
		{"busy replica", strconv.Itoa(rssRows), fmt.Sprintf("%.1f", mib(busy.rss)), fmt.Sprintf("%.1f", mib(busy.peak))},
		{"ratio", "", fmt.Sprintf("%.2f", float64(busy.rss)/float64(idle.rss)), fmt.Sprintf("%.2f", float64(busy.peak)/float64(idle.peak))},
		{fmt.Sprintf("measured after the busy replica ran %s and failed %d deliveries", busyFor.Round(time.Second), rssFailedDeliveries), "", "", ""},
	})
}

// runRSS measures both replicas and says how long the busy one ran first.
func runRSS(t *testing.T) (idle, busy memory, busyFor time.Duration) {
	empty := setupDispatchFixture(t, 20)
	loaded := setupDispatchFixture(t, 20)
	_, err := loaded.pool.Exec(loaded.ctx, `UPDATE thorax_instances SET status = 'dead', died_at = now()`)
	require.NoError(t, err)
	loaded.enqueue(t, rssRows, uniqueName("rss"))

	idleReplica := startReplica(t, replicaOptions{ID: uniqueName("rss-idle"), DatabaseURL: empty.url, Temporal: empty.temporal})
	started := time.Now()
	busyReplica := startReplica(t, replicaOptions{ID: uniqueName("rss-busy"), DatabaseURL: loaded.url, Temporal: loaded.temporal})
	// Summing scans all 100,000 rows: once a second keeps that off the replica's back.
	measured := waitForCountEvery(t, loaded.pool, time.Second, 3*time.Minute, rssFailedDeliveries,
		`SELECT coalesce(sum(attempts), 0) FROM pending_dispatch_requests`)
	idle, busy = readMemory(t, idleReplica), readMemory(t, busyReplica)
	require.Zero(t, loaded.count(t, `SELECT count(*) FROM command_queue`), "nothing may be dispatched without a live Thorax")
	return idle, busy, measured.Sub(started)
}

// memory is a process's resident set now (VmRSS) and at its peak (VmHWM), in bytes.
type memory struct{ rss, peak int64 }

func (m memory) max(o memory) memory { return memory{max(m.rss, o.rss), max(m.peak, o.peak)} }

func readMemory(t *testing.T, r *replica) memory {
	t.Helper()
	file, err := os.Open(fmt.Sprintf("/proc/%d/status", r.cmd.Process.Pid))
	require.NoError(t, err)
	defer file.Close()
	var m memory
	lines := bufio.NewScanner(file)
	for lines.Scan() {
		key, value, _ := strings.Cut(lines.Text(), ":")
		kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch key {
		case "VmRSS":
			require.NoError(t, err)
			m.rss = kib << 10
		case "VmHWM":
			require.NoError(t, err)
			m.peak = kib << 10
		}
	}
	require.NoError(t, lines.Err())
	require.Positive(t, m.rss, "VmRSS of replica %s", r.ID)
	return m
}

// scenario runs body as a test inside the benchmark. The e2e helpers
// (setupDispatchFixture, startReplica) take a *testing.T; testing.RunTests gives them
// one, and their cleanups (replicas stopped, databases dropped) run when the scenario
// ends. The benchmark was selected by -bench already, so -run does not filter it.
func scenario(b *testing.B, name string, body func(t *testing.T)) {
	b.Helper()
	ran, finished := false, false
	matchAll := func(string, string) (bool, error) { return true, nil }
	ok := testing.RunTests(matchAll, []testing.InternalTest{{Name: name, F: func(t *testing.T) {
		ran = true
		body(t)
		finished = true // not reached after t.Skip or t.Fatal
	}}})
	if !ran {
		b.Fatalf("scenario %s did not run (is -test.skip set?)", name)
	}
	if !ok {
		b.Fatalf("scenario %s failed", name)
	}
	if !finished {
		// Its figures are missing: report none rather than index empty samples.
		b.Skipf("scenario %s skipped (its reason is above)", name)
	}
}

// warmUp waits until replicas hold their LISTEN connections, so a timed enqueue wakes
// them rather than their 30 s tick, then puts one request per replica through.
func warmUp(t *testing.T, f dispatchFixture, replicas int) {
	t.Helper()
	// schema.Listen sends its SQL file, comments and all, with the channel quoted;
	// older builds sent the bare statement.
	waitForCount(t, f.pool, time.Minute, replicas, `
		SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query ~ '(^|\n)LISTEN "?`+string(schema.DispatchRequestsChannel)+`"?'`)
	f.enqueue(t, replicas, uniqueName("warm-up"))
	waitForCount(t, f.pool, time.Minute, replicas, `SELECT count(*) FROM command_queue`)
}

// waitForCount polls a count query every drainPoll until it reaches want and returns
// when it first did.
func waitForCount(t *testing.T, pool *pgxpool.Pool, timeout time.Duration, want int, query string, args ...any) time.Time {
	t.Helper()
	return waitForCountEvery(t, pool, drainPoll, timeout, want, query, args...)
}

func waitForCountEvery(t *testing.T, pool *pgxpool.Pool, poll, timeout time.Duration, want int, query string, args ...any) time.Time {
	t.Helper()
	tick := time.NewTicker(poll)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		var n int
		require.NoError(t, pool.QueryRow(context.Background(), query, args...).Scan(&n))
		if n >= want {
			return time.Now()
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("waited %s for %d, have %d: %s", timeout, want, n, query)
		}
	}
}

// openPool opens a pool of Mandible's default size ([database] max_conns = 8), closed
// when the test ends.
func openPool(t *testing.T, url string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool
}

// percentile is the nearest-rank q-quantile of sorted samples.
func percentile(sorted []time.Duration, q float64) time.Duration {
	i := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func mean(sum time.Duration, n int) time.Duration {
	if n == 0 {
		return 0
	}
	return sum / time.Duration(n)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func mib(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func seconds(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

// logTable logs rows as an aligned table under the benchmark's result line.
func logTable(b *testing.B, rows [][]string) {
	b.Helper()
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
	b.Log("\n" + out.String())
}
