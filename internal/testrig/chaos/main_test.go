// Package chaos_test is the fault suite: each scenario breaks a real server, process or
// link of a running cluster under a stream of deployments and checks, from the
// commands' own ledger and the database, that nothing was lost, nothing ran twice,
// nothing stayed stuck and every deployment ended as the scenario's rule says.
//
// `go test` runs the fast subset; MANTIS_CHAOS=all (set by `make chaos`) runs every
// scenario. The table of results is printed at the end, and written to the file
// MANTIS_CHAOS_TABLE names.
package chaos_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// Environment of the suite.
const (
	// AllVar selects every scenario when set to "all".
	AllVar = "MANTIS_CHAOS"
	// TableVar names a file to write the table to.
	TableVar = "MANTIS_CHAOS_TABLE"
)

var (
	serversOnce sync.Once
	servers     *faultenv.Servers
	serversErr  error

	resultsMu sync.Mutex
	results   []faultenv.Result
)

func TestMain(m *testing.M) {
	code := testenv.Main(m)
	if servers != nil {
		if err := servers.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "chaos: stopping the fault stack: %v\n", err)
		}
	}
	resultsMu.Lock()
	table := faultenv.Table(results)
	n := len(results)
	resultsMu.Unlock()
	if n > 0 {
		fmt.Printf("\nFault suite (%s):\n%s", time.Now().UTC().Format(time.DateOnly), table)
		if path := os.Getenv(TableVar); path != "" {
			if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "chaos: writing %s: %v\n", path, err)
			}
		}
	}
	os.Exit(code)
}

// faultStack is the suite's own servers, started by the first scenario.
func faultStack(t *testing.T) *faultenv.Servers {
	t.Helper()
	serversOnce.Do(func() { servers, serversErr = faultenv.StartServers(context.Background()) })
	require.NoError(t, serversErr, "the fault stack is needed and could not be started")
	return servers
}

// full skips a scenario outside `make chaos`.
func full(t *testing.T) {
	t.Helper()
	if os.Getenv(AllVar) != "all" {
		t.Skipf("slow scenario: runs under %s=all (make chaos)", AllVar)
	}
}

// scene is what a scenario's fault works on.
type scene struct {
	t *testing.T
	s *faultenv.Servers
	c *faultenv.Cluster
	w *faultenv.Workload
}

// Timing of a scenario around its fault.
const (
	// warmUp lets deployments be under way when the fault strikes.
	warmUp = 6 * time.Second
	// afterFault keeps the stream going once the fault ended, so that recovery shows.
	afterFault = 10 * time.Second
)

// scenario runs fault under the workload and records and checks the row. fault
// breaks something, repairs it, and returns when the fault ended and the rule the
// deployments must follow.
func scenario(t *testing.T, name, fault string, o faultenv.Options, wo faultenv.WorkloadOptions,
	inject func(sc *scene) (time.Time, faultenv.Rule)) {
	t.Helper()
	preparedScenario(t, name, fault, o, wo, nil, inject)
}

// preparedScenario is scenario with prepare run on the cluster before the workload
// starts, when nothing has run yet.
func preparedScenario(t *testing.T, name, fault string, o faultenv.Options, wo faultenv.WorkloadOptions,
	prepare func(c *faultenv.Cluster), inject func(sc *scene) (time.Time, faultenv.Rule)) {
	t.Helper()
	began := time.Now()
	s := faultStack(t)
	t.Cleanup(func() { heal(t, s) })
	c := faultenv.StartCluster(t, s, o)
	t.Logf("cluster up after %s", time.Since(began).Round(time.Second))
	if prepare != nil {
		prepare(c)
	}
	runOn(t, s, c, name, fault, wo, inject)
}

// runOn runs fault under a workload on a running cluster c, and records and checks
// the row.
func runOn(t *testing.T, s *faultenv.Servers, c *faultenv.Cluster, name, fault string, wo faultenv.WorkloadOptions,
	inject func(sc *scene) (time.Time, faultenv.Rule)) {
	t.Helper()
	sc := &scene{t: t, s: s, c: c, w: c.StartWorkload(wo)}
	<-time.After(warmUp)
	faultStart := time.Now()
	faultEnd, rule := inject(sc)
	t.Logf("fault took %s", faultEnd.Sub(faultStart).Round(time.Second))
	<-time.After(afterFault)
	verifying := time.Now()
	res := c.Verify(name, fault, sc.w, faultEnd, rule)
	t.Logf("verified in %s", time.Since(verifying).Round(time.Second))
	record(res)
	t.Logf("%s: %v", name, res.Row())
	if !res.Clean() {
		t.Logf("process logs:\n%s", c.Logs(2500))
	}
	require.True(t, res.Clean(), "scenario %s: %v", name, res.Problems)
}

// record adds the row to the table and rewrites the table file, so that a run cut
// short keeps the rows it finished.
func record(res faultenv.Result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, res)
	if path := os.Getenv(TableVar); path != "" {
		_ = os.WriteFile(path, []byte(faultenv.Table(results)), 0o644)
	}
}

// heal thaws and restarts whatever a failed scenario left broken, so the next one
// starts on working servers.
func heal(t *testing.T, s *faultenv.Servers) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, srv := range []devstack.Server{devstack.ServerPostgres, devstack.ServerRabbitMQ, devstack.ServerTemporal} {
		_ = s.Thaw(srv)
		if s.Pid(srv) == 0 {
			if err := s.RestartServer(srv); err != nil {
				t.Errorf("restarting %s after the scenario: %v", srv, err)
			}
		}
	}
	_, _ = s.RabbitMQCtl(ctx, "start_app")
}
