package e2e_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/internal/rpc"
	"github.com/mantis-deploy/mantis/internal/testrig/scale"
	"github.com/mantis-deploy/mantis/internal/testrig/soak"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// What the fan-out benchmark reads of the processes, the database and Temporal.

// fanOutPids are the processes whose CPU the benchmark reads.
type fanOutPids struct {
	mandible, thorax int
	// postmaster is PostgreSQL's server process (the shared stack's: other work on it
	// counts too); temporal is the Temporal server's, 0 when not found on this host.
	postmaster, temporal int
}

// fanOutCPU is CPU time used so far, by process group.
type fanOutCPU struct {
	mandible, thorax, postgres, temporal time.Duration
	// agents is this process, the in-process agents and the commands they ran,
	// without the Mandible and Thorax processes it started.
	agents time.Duration
	// sessions is the CPU of each PostgreSQL session on the test's database, by pid.
	sessions map[int32]time.Duration
	// machine is every core's busy time.
	machine time.Duration
}

// sub is what was used from o to c. A session that opened in between counts whole.
func (c fanOutCPU) sub(o fanOutCPU) (d fanOutCPU, sessions time.Duration) {
	for pid, cpu := range c.sessions {
		sessions += cpu - o.sessions[pid]
	}
	return fanOutCPU{mandible: c.mandible - o.mandible, thorax: c.thorax - o.thorax, postgres: c.postgres - o.postgres,
		temporal: c.temporal - o.temporal, agents: c.agents - o.agents, machine: c.machine - o.machine}, sessions
}

// serverPids finds the processes of the rig and of the servers it uses.
func (r *fanOutRig) serverPids(t *testing.T) fanOutPids {
	t.Helper()
	var backend int
	require.NoError(t, r.pool.QueryRow(r.ctx, `SELECT pg_backend_pid()`).Scan(&backend))
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", backend))
	require.NoError(t, err, "reading the stat of PostgreSQL backend %d (is the server on this host?)", backend)
	st, err := scale.ParseStat(stat)
	require.NoError(t, err)
	return fanOutPids{mandible: r.mandible.cmd.Process.Pid, thorax: r.thorax.Pid(), postmaster: st.PPid,
		temporal: temporalPid(testenv.TemporalServer(t).Address)}
}

// temporalPid is the pid of the `temporal server start-dev` serving addr's port, or 0.
func temporalPid(addr string) int {
	_, port, _ := strings.Cut(addr, ":")
	paths, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(args[0]) != "temporal" {
			continue
		}
		for i := 1; i+1 < len(args); i++ {
			if args[i] == "--port" && args[i+1] == port {
				pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(p)))
				return pid
			}
		}
	}
	return 0
}

// readCPU reads the CPU time of every group now.
func (r *fanOutRig) readCPU(t *testing.T, p fanOutPids) fanOutCPU {
	t.Helper()
	snap, err := scale.ReadSnapshot()
	require.NoError(t, err)
	machine, err := soak.MachineCPU()
	require.NoError(t, err)
	c := fanOutCPU{mandible: snap.Tree(p.mandible), thorax: snap.Tree(p.thorax), postgres: snap.Tree(p.postmaster),
		machine: machine, sessions: map[int32]time.Duration{}}
	c.agents = snap.Tree(os.Getpid()) - c.mandible - c.thorax
	if p.temporal > 0 {
		c.temporal = snap.Tree(p.temporal)
	}
	rows, err := r.pool.Query(r.ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	for _, pid := range pids {
		if cpu, err := soak.ProcessCPU(int(pid)); err == nil { // a session may have closed
			c.sessions[pid] = cpu
		}
	}
	return c
}

// peakRSS is the process's peak resident set (VmHWM), in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	require.NoError(t, err)
	lines := bufio.NewScanner(bytes.NewReader(raw))
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "VmHWM:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err, "VmHWM of pid %d", pid)
			return kib << 10
		}
	}
	t.Fatalf("no VmHWM in the status of pid %d", pid)
	return 0
}

// loadAverage is the machine's 1, 5 and 15 minute load averages, as /proc/loadavg
// shows them.
func loadAverage(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile("/proc/loadavg")
	require.NoError(t, err)
	f := strings.Fields(string(raw))
	require.GreaterOrEqual(t, len(f), 3, "/proc/loadavg: %q", raw)
	return strings.Join(f[:3], " ")
}

// span is when the first and the last of a step's commands passed a point, after
// the deployment was created.
type span struct{ first, last time.Duration }

func (s span) String() string {
	return fmt.Sprintf("%.2f – %.2f", s.first.Seconds(), s.last.Seconds())
}

// stepLegs is when a step's commands passed each point of their way.
type stepLegs struct {
	position, commands int
	// batches is how many dispatch transactions wrote the step's commands (all rows
	// of one carry its start as created_at).
	batches int
	// enqueued: the request written; dispatched: the command written (the
	// dispatcher's delivery); claimed: Thorax's fetch; started and finished: the
	// run on the agent.
	enqueued, dispatched, claimed, started, finished span
	// handOff is claimed -> started and run started -> finished, per command: p50
	// and p99.
	handOff, run span
}

// dispatchRate is the step's commands over the time from its first request
// enqueued to its last command dispatched: a dispatch transaction writes its batch
// with one created_at, so first -> last dispatch alone is 0 for a single batch.
func (l stepLegs) dispatchRate() float64 {
	d := l.dispatched.last - l.enqueued.first
	if d <= 0 {
		return 0
	}
	return float64(l.commands) / d.Seconds()
}

// legs reads each step's points from the database.
func (r *fanOutRig) legs(t *testing.T, deployment string, created time.Time) []stepLegs {
	t.Helper()
	rows, err := r.pool.Query(r.ctx, `
		SELECT c.step_position, count(*), count(DISTINCT c.created_at),
		       min(p.created_at), max(p.created_at), min(c.created_at), max(c.created_at),
		       min(c.claimed_at), max(c.claimed_at), min(c.started_at), max(c.started_at),
		       min(c.finished_at), max(c.finished_at),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM c.started_at - c.claimed_at)),
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM c.started_at - c.claimed_at)),
		       percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM c.finished_at - c.started_at)),
		       percentile_cont(0.99) WITHIN GROUP (ORDER BY extract(epoch FROM c.finished_at - c.started_at))
		FROM command_queue c JOIN pending_dispatch_requests p ON p.id = c.dispatch_request_id
		WHERE c.deployment_id = $1 AND c.status = 'succeeded'
		GROUP BY c.step_position ORDER BY c.step_position`, deployment)
	require.NoError(t, err)
	var out []stepLegs
	for rows.Next() {
		var l stepLegs
		var (
			ts [10]time.Time
			ps [4]float64
		)
		require.NoError(t, rows.Scan(&l.position, &l.commands, &l.batches, &ts[0], &ts[1], &ts[2], &ts[3], &ts[4], &ts[5],
			&ts[6], &ts[7], &ts[8], &ts[9], &ps[0], &ps[1], &ps[2], &ps[3]))
		sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
		l.handOff, l.run = span{sec(ps[0]), sec(ps[1])}, span{sec(ps[2]), sec(ps[3])}
		at := func(i int) span { return span{ts[i].Sub(created), ts[i+1].Sub(created)} }
		l.enqueued, l.dispatched, l.claimed, l.started, l.finished = at(0), at(2), at(4), at(6), at(8)
		out = append(out, l)
	}
	require.NoError(t, rows.Err())
	return out
}

// workflowHistory is the history of a deployment's workflow over all its runs.
type workflowHistory struct {
	runs                      int
	events, bytes             int64
	maxRunEvents, maxRunBytes int64
}

// fanOutHistory reads the history length and size of every run of the
// deployment's workflow, once every run has closed.
func fanOutHistory(t *testing.T, deployment string) workflowHistory {
	t.Helper()
	tmp := testenv.TemporalServer(t)
	tc, err := client.Dial(client.Options{HostPort: tmp.Address, Namespace: tmp.Namespace})
	require.NoError(t, err)
	defer tc.Close()
	ctx := context.Background()
	workflowID := "deployment:" + deployment
	var h workflowHistory
	require.EventuallyWithT(t, func(ct *assert.CollectT) {
		list, err := tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: tmp.Namespace, PageSize: 1000, Query: fmt.Sprintf("WorkflowId = '%s'", workflowID),
		})
		require.NoError(ct, err)
		require.NotEmpty(ct, list.GetExecutions(), "no run of %s listed yet", workflowID)
		h = workflowHistory{}
		completed := 0
		for _, e := range list.GetExecutions() {
			switch e.GetStatus() {
			case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
				completed++
			case enumspb.WORKFLOW_EXECUTION_STATUS_CONTINUED_AS_NEW:
			default:
				require.Failf(ct, "a run neither completed nor continued as new", "%s run %s: %s",
					workflowID, e.GetExecution().GetRunId(), e.GetStatus())
				return
			}
			desc, err := tc.WorkflowService().DescribeWorkflowExecution(ctx, &workflowservice.DescribeWorkflowExecutionRequest{
				Namespace: tmp.Namespace, Execution: &commonpb.WorkflowExecution{WorkflowId: workflowID, RunId: e.GetExecution().GetRunId()},
			})
			require.NoError(ct, err)
			info := desc.GetWorkflowExecutionInfo()
			h.runs++
			h.events += info.GetHistoryLength()
			h.bytes += info.GetHistorySizeBytes()
			h.maxRunEvents = max(h.maxRunEvents, info.GetHistoryLength())
			h.maxRunBytes = max(h.maxRunBytes, info.GetHistorySizeBytes())
		}
		require.Equal(ct, 1, completed, "runs of %s that completed", workflowID)
	}, time.Minute, 500*time.Millisecond, "the runs of %s never all closed", workflowID)
	return h
}

// rpcTime is the calls of one gRPC method and the time they took, summed.
type rpcTime struct {
	name           string
	calls, seconds float64
}

func (r rpcTime) mean() float64 {
	if r.calls == 0 {
		return 0
	}
	return 1000 * r.seconds / r.calls
}

// thoraxLegs are the calls of Thorax whose time the benchmark reports: its claims and
// result stores at Mandible (client), and its answers to the agents' reports, which
// wait for the store (server).
var thoraxLegs = []struct{ metric, method, name string }{
	{rpc.ClientDurationMetric, "FetchPendingCommands", "-> Mandible FetchPendingCommands"},
	{rpc.ClientDurationMetric, "StoreCommandResult", "-> Mandible StoreCommandResult"},
	{rpc.ServerDurationMetric, "ReportResult", "<- agents ReportResult"},
}

// thoraxCalls is what each of thoraxLegs did between two scrapes of Thorax's
// /metrics.
func thoraxCalls(before, after string) []rpcTime {
	out := make([]rpcTime, len(thoraxLegs))
	for i, l := range thoraxLegs {
		b, a := histogramSums(before, l.metric, l.method), histogramSums(after, l.metric, l.method)
		out[i] = rpcTime{name: l.name, calls: a.calls - b.calls, seconds: a.seconds - b.seconds}
	}
	return out
}

// counterSum is the sum of a counter's series in a scrape.
func counterSum(text, metric string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		name, value, ok := strings.Cut(line, " ")
		if !ok || (name != metric && !strings.HasPrefix(name, metric+"{")) {
			continue
		}
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			sum += v
		}
	}
	return sum
}

// histogramSums reads the _count and _sum of a duration histogram's series of
// method from a scrape.
func histogramSums(text, metric, method string) rpcTime {
	var r rpcTime
	for _, line := range strings.Split(text, "\n") {
		name, rest, ok := strings.Cut(line, "{")
		if !ok || (name != metric+"_sum" && name != metric+"_count") {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok || !strings.Contains(labels, `method="`+method+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			continue
		}
		if name == metric+"_sum" {
			r.seconds += v
		} else {
			r.calls += v
		}
	}
	return r
}
