package scale_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
	"github.com/mantis-deploy/mantis/internal/testrig/scale"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// Environment of the scale run; `make scale` sets them.
const (
	// AgentsVar is the number of poll agents; the run is skipped without it.
	AgentsVar = "MANTIS_SCALE_AGENTS"
	// RequestsVar is the dispatch requests each size drains.
	RequestsVar = "MANTIS_SCALE_REQUESTS"
	// ReplicasVar lists the replica counts, space separated.
	ReplicasVar = "MANTIS_SCALE_REPLICAS"
	// WindowVar bounds each size's drain (a Go duration).
	WindowVar = "MANTIS_SCALE_WINDOW"
	// ReportVar names a file to write the report to.
	ReportVar = "MANTIS_SCALE_REPORT"
)

// Shape of the run and of the fleet the model is projected onto.
const (
	thoraxes        = 2
	defaultRequests = 2000
	defaultWindow   = 3 * time.Minute
	// idleWindow is measured before each size's load, for the idle cost.
	idleWindow = 20 * time.Second
	planRate   = 1000
	planAgents = 10000
	planMandib = 100
	planThorax = 20
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// settings is the run's shape, from the environment.
type settings struct {
	agents, requests int
	replicas         []int
	window           time.Duration
}

func readSettings(t *testing.T) settings {
	t.Helper()
	raw := os.Getenv(AgentsVar)
	if raw == "" {
		t.Skipf("long run: set %s (make scale)", AgentsVar)
	}
	s := settings{requests: defaultRequests, replicas: []int{1, 2, 4}, window: defaultWindow}
	var err error
	s.agents, err = strconv.Atoi(raw)
	require.NoError(t, err, "%s", AgentsVar)
	require.Positive(t, s.agents, "%s", AgentsVar)
	if v := os.Getenv(RequestsVar); v != "" {
		s.requests, err = strconv.Atoi(v)
		require.NoError(t, err, "%s", RequestsVar)
	}
	if v := os.Getenv(ReplicasVar); v != "" {
		s.replicas = nil
		for _, f := range strings.Fields(v) {
			n, err := strconv.Atoi(f)
			require.NoError(t, err, "%s", ReplicasVar)
			s.replicas = append(s.replicas, n)
		}
	}
	if v := os.Getenv(WindowVar); v != "" {
		s.window, err = time.ParseDuration(v)
		require.NoError(t, err, "%s", WindowVar)
	}
	return s
}

func TestScale(t *testing.T) {
	set := readSettings(t)
	report := scale.Report{Date: time.Now(), Machine: machine(), LoadBefore: loadAverage(),
		Target: scale.Fleet{Replicas: planMandib, Thoraxes: planThorax, Agents: planAgents, Rate: planRate}}
	servers, err := faultenv.StartServers(context.Background())
	require.NoError(t, err)
	t.Cleanup(func() { _ = servers.Close() })
	report.Temporal = servers.TemporalKind()
	require.Equal(t, "server", report.Temporal, "the run measures the production Temporal server: set %s=server", faultenv.TemporalKindVar)

	for _, n := range set.replicas {
		t.Run(fmt.Sprintf("replicas=%d", n), func(t *testing.T) {
			size, notes, problems := measureSize(t, servers, n, set)
			report.Sizes = append(report.Sizes, size)
			report.Notes = append(report.Notes, notes...)
			report.Problems = append(report.Problems, problems...)
		})
	}
	report.LoadAfter = loadAverage()
	report.Model = scale.Fit(report.Sizes)
	out := report.Markdown()
	t.Logf("\n%s", out)
	if path := os.Getenv(ReportVar); path != "" {
		require.NoError(t, os.WriteFile(path, []byte(out), 0o644))
	}
	require.Len(t, report.Sizes, len(set.replicas), "a size did not finish")
	require.Empty(t, report.Problems)
}

// machine is the cores and the memory of the machine.
func machine() string {
	mem := "memory unknown"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				kb, _ := strconv.Atoi(f[1])
				mem = fmt.Sprintf("%.1f GiB memory", float64(kb)/(1<<20))
			}
		}
	}
	return fmt.Sprintf("%d cores, %s", runtime.NumCPU(), mem)
}

func loadAverage() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
