package e2e_test

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/soak"
	"github.com/mantis-deploy/mantis/internal/thorax"
)

// The fan-out benchmark (`make bench BENCH=FanOut`): deployments of `true` on 1,000 and
// 10,000 poll agents, and a 3-step one on 1,000 with max_parallel 100, each on a
// cluster of its own (see fanout_rig_test.go for what runs as a process and what in
// this one).

const (
	// fanOutStepGoal1k and fanOutStepGoal10k are the goals of create -> last result of
	// a one-step deployment on 1,000 and on 10,000 targets.
	fanOutStepGoal1k  = 5 * time.Second
	fanOutStepGoal10k = 60 * time.Second
	// temporalMaxEvents and temporalMaxHistoryBytes are Temporal's limits of one run's
	// history; the goal is a tenth of each.
	temporalMaxEvents       = 51_200
	temporalMaxHistoryBytes = 50 << 20
	// fanOutResultPoll is how often the benchmark counts the stored results.
	fanOutResultPoll = 50 * time.Millisecond
	// fanOutDeployTimeout bounds the wait for every result of a case.
	fanOutDeployTimeout = 15 * time.Minute
)

// fanOutCase is one deployment the benchmark measures.
type fanOutCase struct {
	targets, steps, maxParallel int
}

func (c fanOutCase) name() string {
	if c.maxParallel == 0 {
		return fmt.Sprintf("%d-targets-%d-step", c.targets, c.steps)
	}
	return fmt.Sprintf("%d-targets-%d-steps-max-parallel-%d", c.targets, c.steps, c.maxParallel)
}

// goal is the goal of create -> last result, 0 for none.
func (c fanOutCase) goal() time.Duration {
	switch {
	case c.steps != 1:
		return 0
	case c.targets <= 1000:
		return fanOutStepGoal1k
	case c.targets <= 10_000:
		return fanOutStepGoal10k
	}
	return 0
}

// spec is the deployment of the case on the targets labelled fanOutLabel=label.
func (c fanOutCase) spec(label string) string {
	steps := make([]string, c.steps)
	for i := range steps {
		steps[i] = fmt.Sprintf(`{"name":"noop-%d","command":"true"}`, i+1)
	}
	return fmt.Sprintf(`{"name":"fan-out","target_selector":{%q:%q},"max_parallel":%d,"steps":[%s]}`,
		fanOutLabel, label, c.maxParallel, strings.Join(steps, ","))
}

// fanOutCases are the full cases, or with MANTIS_BENCH_SHORT=1 smaller ones that
// take every path of the full ones.
func fanOutCases() []fanOutCase {
	if os.Getenv(benchShortVar) == "1" {
		return []fanOutCase{{targets: 200, steps: 1}, {targets: 1000, steps: 1}, {targets: 200, steps: 3, maxParallel: 100}}
	}
	return []fanOutCase{{targets: 1000, steps: 1}, {targets: 10_000, steps: 1}, {targets: 1000, steps: 3, maxParallel: 100}}
}

// fanOutResult is what one case measured.
type fanOutResult struct {
	// elapsed is create -> the last result's finished_at; observed, create -> the
	// benchmark counted every result stored.
	elapsed, observed time.Duration
	legs              []stepLegs
	history           workflowHistory
	// cpu is what each group used from create to observed; sessions is the CPU of
	// the PostgreSQL sessions on the test's database.
	cpu      fanOutCPU
	sessions time.Duration
	// mandibleRSS and thoraxRSS are peak resident sets (VmHWM); agentsRSS is the
	// resident set of this process and its agent shards after the last result.
	mandibleRSS, thoraxRSS, agentsRSS int64
	// calls are Thorax's gRPC calls from create to the last result; rehanded, the
	// commands it handed to a poll agent again because the answer was lost.
	calls    []rpcTime
	rehanded float64
	// loadBefore and loadAfter are /proc/loadavg at create and at the last result.
	loadBefore, loadAfter string
	// fileLimit is the benchmark process's open-file limit (see raiseFileLimit).
	fileLimit uint64
}

// BenchmarkDeploymentFanOut measures, for each case, create -> last result, the
// dispatch rate and the legs of each step, the workflow's history over all its runs,
// the peak RSS of Mandible, Thorax and the in-process agents, and the CPU each
// process group used during the deployment.
func BenchmarkDeploymentFanOut(b *testing.B) {
	for _, fc := range fanOutCases() {
		b.Run(fc.name(), func(b *testing.B) {
			for range b.N {
				var res fanOutResult
				scenario(b, "fan-out-"+fc.name(), func(t *testing.T) {
					rig := startFanOutRig(t, fc.targets)
					res = rig.deploy(t, fc)
				})
				res.report(b, fc)
			}
		})
	}
}

// deploy creates the case's deployment on the rig's fleet, waits for its last
// result and reads what it cost.
func (r *fanOutRig) deploy(t *testing.T, fc fanOutCase) fanOutResult {
	t.Helper()
	pids := r.serverPids(t)
	want := fc.targets * fc.steps
	res := fanOutResult{loadBefore: loadAverage(t), fileLimit: r.fileLimit}
	callsBefore := scrapeText(t, r.thoraxMetrics)
	before := r.readCPU(t, pids)
	start := time.Now()
	code, created := api(t, r.mandible.replica, http.MethodPost, "/api/v1/deployments", fc.spec(r.label))
	require.Equal(t, http.StatusAccepted, code, created)
	id := created["id"].(string)
	observed := waitForCountEvery(t, r.pool, fanOutResultPoll, fanOutDeployTimeout, want,
		`SELECT count(*) FROM command_queue WHERE deployment_id = $1 AND status = 'succeeded'`, id)
	after := r.readCPU(t, pids)
	callsAfter := scrapeText(t, r.thoraxMetrics)
	res.calls = thoraxCalls(callsBefore, callsAfter)
	res.rehanded = counterSum(callsAfter, thorax.RehandedMetric) - counterSum(callsBefore, thorax.RehandedMetric)
	res.loadAfter = loadAverage(t)
	res.observed = observed.Sub(start)
	res.cpu, res.sessions = after.sub(before)
	var last time.Time
	err := r.pool.QueryRow(r.ctx,
		`SELECT max(finished_at) FROM command_queue WHERE deployment_id = $1 AND status = 'succeeded'`, id).Scan(&last)
	require.NoError(t, err)
	res.elapsed = last.Sub(start)
	waitDeployment(t, r.mandible.replica, id, "succeeded")

	res.legs = r.legs(t, id, start)
	require.Len(t, res.legs, fc.steps, "steps with results")
	for _, l := range res.legs {
		require.Equal(t, fc.targets, l.commands, "results of step %d", l.position)
	}
	res.history = fanOutHistory(t, id)
	res.mandibleRSS = peakRSS(t, pids.mandible)
	res.thoraxRSS = peakRSS(t, pids.thorax)
	// This process's peak is its whole life's, earlier cases' fleets included: its
	// resident set now is this fleet's.
	res.agentsRSS, err = soak.ReadRSS(os.Getpid())
	require.NoError(t, err)
	for _, pid := range r.shardPids {
		rss, err := soak.ReadRSS(pid)
		require.NoError(t, err, "RSS of agent shard %d", pid)
		res.agentsRSS += rss
	}
	return res
}

// report reports the case's metrics and logs its table.
func (res fanOutResult) report(b *testing.B, fc fanOutCase) {
	b.Helper()
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(res.elapsed.Seconds(), "create-to-last-result-s")
	b.ReportMetric(float64(res.history.events), "history-events")
	b.ReportMetric(float64(res.history.bytes)/1024, "history-KiB")
	if len(res.legs) > 0 {
		b.ReportMetric(res.legs[0].dispatchRate(), "step1-dispatch/s")
	}
	goal := "—"
	if g := fc.goal(); g > 0 {
		goal = fmt.Sprintf("< %s (%s)", g, met(res.elapsed < g))
	}
	h := res.history
	historyGoal := h.maxRunEvents < temporalMaxEvents/10 && h.maxRunBytes < temporalMaxHistoryBytes/10
	wall := res.observed.Seconds()
	share := func(d time.Duration) string { return fmt.Sprintf("%.1f s (%.2f cores)", d.Seconds(), d.Seconds()/wall) }
	rows := [][]string{
		{fc.name(), "figure", "goal"},
		{"create -> last result (finished_at)", seconds(res.elapsed) + " s", goal},
		{"create -> every result counted stored", seconds(res.observed) + " s", ""},
		{"load average at create / at last result", res.loadBefore + " / " + res.loadAfter, ""},
		{"open-file limit of the agents' process (and Thorax's)", fmt.Sprint(res.fileLimit), ""},
	}
	for _, l := range res.legs {
		rows = append(rows,
			[]string{fmt.Sprintf("step %d: dispatch rate (first enqueued -> last dispatched)", l.position+1),
				fmt.Sprintf("%.0f requests/s, %d batches", l.dispatchRate(), l.batches), ""},
			[]string{"  enqueued (s after create, first – last)", l.enqueued.String(), ""},
			[]string{"  dispatched (command written)", l.dispatched.String(), ""},
			[]string{"  claimed by Thorax (fetch)", l.claimed.String(), ""},
			[]string{"  started on the agent", l.started.String(), ""},
			[]string{"  finished on the agent", l.finished.String(), ""},
			[]string{"  per command: claimed -> started (hand-off), p50 / p99 s", l.handOff.String(), ""},
			[]string{"  per command: started -> finished (run of `true`), p50 / p99 s", l.run.String(), ""})
	}
	rows = append(rows,
		[]string{"workflow history, all runs", fmt.Sprintf("%d runs, %d events, %.0f KiB", h.runs, h.events, float64(h.bytes)/1024), ""},
		[]string{"  largest run", fmt.Sprintf("%d events, %.0f KiB", h.maxRunEvents, float64(h.maxRunBytes)/1024),
			fmt.Sprintf("< %d events, < %d MiB (%s)", temporalMaxEvents/10, temporalMaxHistoryBytes/10>>20, met(historyGoal))},
	)
	for _, c := range res.calls {
		rows = append(rows, []string{"Thorax " + c.name, fmt.Sprintf("%.0f calls, mean %.1f ms", c.calls, c.mean()), ""})
	}
	rows = append(rows, []string{"commands Thorax handed again (the poll answer never reached the agent)", fmt.Sprintf("%.0f", res.rehanded), ""})
	rows = append(rows,
		[]string{"peak RSS Mandible / Thorax; RSS of the agents' processes",
			fmt.Sprintf("%.0f / %.0f / %.0f MiB", mib(res.mandibleRSS), mib(res.thoraxRSS), mib(res.agentsRSS)), ""},
		[]string{"CPU create -> last result: Mandible", share(res.cpu.mandible), ""},
		[]string{"  Thorax", share(res.cpu.thorax), ""},
		[]string{"  PostgreSQL sessions of this database / whole server (shared)", share(res.sessions) + " / " + share(res.cpu.postgres), ""},
		[]string{"  Temporal server (shared)", share(res.cpu.temporal), ""},
		[]string{"  agents and their commands (this process)", share(res.cpu.agents), ""},
		[]string{"  machine, every process", share(res.cpu.machine), ""})
	// Printed, not logged: a benchmark's log is cut to its first lines without -v.
	var out strings.Builder
	w := tabwriter.NewWriter(&out, 0, 0, 2, ' ', 0)
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	_ = w.Flush()
	fmt.Print(out.String())
}

// met says whether a goal was met.
func met(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}
