package e2e_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// The dashboard and the alert rules, relative to this package.
var (
	dashboardPath = filepath.Join("..", "..", "..", "deploy", "grafana", "mantis.json")
	alertsPath    = filepath.Join("..", "..", "..", "deploy", "prometheus", "alerts.yaml")
)

// metricName finds the Mantis and Temporal metric names a PromQL expression
// uses; seriesSuffix is what a histogram's or summary's series add to their
// family's name.
var (
	metricName   = regexp.MustCompile(`\b(?:mantis|temporal)_[a-z0-9_]+`)
	seriesSuffix = regexp.MustCompile(`_(?:bucket|sum|count)$`)
)

// referencedFamilies are the metric families the files at paths name.
func referencedFamilies(t *testing.T, paths ...string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		for _, name := range metricName.FindAllString(string(b), -1) {
			seen[seriesSuffix.ReplaceAllString(name, "")] = true
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// readyStatus is the status /readyz answers at addr.
func readyStatus(addr string) int {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// freeLoopback is a loopback address whose port was free a moment ago.
func freeLoopback(t *testing.T) string {
	t.Helper()
	port, err := devstack.FreePort(false)
	require.NoError(t, err)
	return fmt.Sprintf("127.0.0.1:%d", port)
}

// queueSection is the [queue] section of a process on broker b.
func queueSection(b testenv.Broker) string {
	return fmt.Sprintf(`[queue]
enabled = true
host = %q
port = %d
username = %q
password = %q
vhost = %q
ca_cert_path = %q
client_cert_path = %q
client_key_path = %q
`, b.Host, b.Port, b.User, b.Password, b.VHost, b.CACert, b.ClientCert, b.ClientKey)
}

// meteredRig is Mandible with a broker, a Thorax consuming it, a poll-mode and
// a listen-mode agent, each process with its metrics listener.
type meteredRig struct {
	*execCluster
	thorax                     *thoraxProcess
	poll                       *mantisProcess
	listen                     *listenAgentProcess
	thoraxMetrics              string
	pollMetrics, listenMetrics string
}

func setupMeteredRig(t *testing.T) meteredRig {
	t.Helper()
	b := testenv.RabbitMQ(t)
	url := testenv.DatabaseURL(t)
	pool, err := pgxpool.New(t.Context(), url)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	dir := t.TempDir()
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	c := &execCluster{ctx: t.Context(), dir: dir, pool: pool, certs: certs, heartbeatTimeout: 10 * time.Second}
	c.mandibleOptions = replicaOptions{
		ID: uniqueName("metrics"), DatabaseURL: url, Temporal: testenv.TemporalServer(t), PollInterval: "2s", Broker: &b,
	}
	c.mandible = startSecureReplica(t, c.mandibleOptions, certs, c.heartbeatTimeout)
	r := meteredRig{execCluster: c, thoraxMetrics: freeLoopback(t), pollMetrics: freeLoopback(t), listenMetrics: freeLoopback(t)}
	r.thorax = r.startThorax(t, b)
	r.poll = r.startPollAgent(t)
	r.listen = r.startListenAgent(t)
	instance := c.waitRegistered(t, r.thorax)
	target := c.registerListenTarget(t, r.listen)
	require.NotNil(t, target.AssignedInstanceID)
	require.Equal(t, instance, *target.AssignedInstanceID)
	c.waitPollTarget(t, r.poll, instance)
	return r
}

func (r meteredRig) startThorax(t *testing.T, b testenv.Broker) *thoraxProcess {
	t.Helper()
	addr := freeLoopback(t)
	name := uniqueName("thorax")
	cert, key := r.issue(t, identity.RoleThorax, name)
	conf := fmt.Sprintf(`name = %q
[mandible]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[polling]
interval = %q
fallback_interval = %q
[heartbeat]
interval = %q
[agents]
listen = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[drain]
timeout = "5s"
[metrics]
listen = %q
`, name, r.mandible.GRPCAddr, r.certs.CACert(), cert, key,
		thoraxPollInterval, thoraxPollInterval, thoraxHeartbeatInterval,
		addr, r.certs.CACert(), cert, key, r.thoraxMetrics) + queueSection(b)
	return &thoraxProcess{mantisProcess: r.startProcess(t, name, testenv.Binary(t, "thorax"), conf), AgentsAddr: addr}
}

func (r meteredRig) startPollAgent(t *testing.T) *mantisProcess {
	t.Helper()
	name := uniqueName("poll")
	cert, key := r.issue(t, identity.RoleAgent, name)
	conf := fmt.Sprintf(`name = %q
mode = "poll"
[thorax]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[journal]
dir = %q
[metrics]
listen = %q
`, name, r.thorax.AgentsAddr, r.certs.CACert(), cert, key, filepath.Join(r.dir, name, "journal"), r.pollMetrics) + agentExecConfig
	return r.startProcess(t, name, testenv.Binary(t, "agent"), conf)
}

func (r meteredRig) startListenAgent(t *testing.T) *listenAgentProcess {
	t.Helper()
	addr := freeLoopback(t)
	name := uniqueName("listen")
	cert, key := r.issue(t, identity.RoleAgent, name)
	conf := fmt.Sprintf(`name = %q
mode = "listen"
[listen]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[journal]
dir = %q
[metrics]
listen = %q
`, name, addr, r.certs.CACert(), cert, key, filepath.Join(r.dir, name, "journal"), r.listenMetrics) + agentExecConfig
	a := &listenAgentProcess{mantisProcess: r.startProcess(t, name, testenv.Binary(t, "agent"), conf), Addr: addr}
	require.Eventually(t, func() bool { return readyStatus(r.listenMetrics) == http.StatusOK || a.exited() },
		startTimeout, 50*time.Millisecond, "listen agent %s never served", name)
	require.False(t, a.exited(), "listen agent %s exited:\n%s", name, a.log())
	return a
}

// Every metric the Grafana dashboard and the Prometheus rules name is in a real
// scrape of Mandible, Thorax or an agent after one deployment, and Thorax and
// both agents answer /readyz 200 once registered, polling or serving.
func TestEveryMetricTheDashboardAndAlertsNameIsExported(t *testing.T) {
	referenced := referencedFamilies(t, dashboardPath, alertsPath)
	require.NotEmpty(t, referenced)

	r := setupMeteredRig(t)
	for _, addr := range []string{r.thoraxMetrics, r.pollMetrics, r.listenMetrics} {
		require.Eventually(t, func() bool { return readyStatus(addr) == http.StatusOK }, startTimeout, 50*time.Millisecond,
			"%s never ready", addr)
	}
	spec := fmt.Sprintf(`{"name":"metrics","targets":[%q,%q],"steps":[{"name":"hello","command":"echo hello"}]}`,
		r.poll.Name, r.listen.Name)
	code, created := api(t, r.mandible.replica, http.MethodPost, "/api/v1/deployments", spec)
	require.Equal(t, http.StatusAccepted, code, created)
	waitDeployment(t, r.mandible.replica, created["id"].(string), "succeeded")
	resp, err := http.Get("http://" + r.mandible.HTTPAddr + "/api/v1/targets")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode, "a refusal, counted in mantis_http_refusals_total")

	addrs := map[string]string{"mandible": r.mandible.HTTPAddr, "thorax": r.thoraxMetrics,
		"poll agent": r.pollMetrics, "listen agent": r.listenMetrics}
	exported := map[string]bool{}
	for process, addr := range addrs {
		text := scrapeText(t, addr)
		families := familiesIn(text)
		require.NotEmpty(t, families, process)
		requireMantisFamiliesLintClean(t, process, text)
		for name := range families {
			exported[name] = true
		}
	}
	var missing []string
	for _, name := range referenced {
		if !exported[name] {
			missing = append(missing, name)
		}
	}
	require.Empty(t, missing, "named by the dashboard or the rules but in no scrape")

	// The metrics reference (docs/reference/metrics.md) names only what the processes
	// export, too.
	documented := documentedMetricFamilies(t)
	require.NotEmpty(t, documented)
	missing = nil
	for _, name := range documented {
		if _, later := onlyAfterTheirEvent[name]; !exported[name] && !later {
			missing = append(missing, name)
		}
	}
	require.Empty(t, missing, "listed in the metrics reference but in no scrape")
	// And the other way: every family of Mantis's own that a process exports is in it.
	require.Empty(t, undocumentedFamilies(exported, documented), "exported but not in the metrics reference")

	// The deployment was counted: started, finished by status, timed.
	requireDeploymentMetrics(t, r.mandible.HTTPAddr)
}

// onlyAfterTheirEvent are documented families that a vector has no series of until
// what it counts happens, which the rig does not provoke.
var onlyAfterTheirEvent = map[string]string{
	"mantis_auth_refusals_total": "a peer presenting the wrong identity",
}

// metricsReferencePath is the generated metrics reference (make docs), relative to
// this package.
var metricsReferencePath = filepath.Join("..", "..", "..", "docs", "reference", "metrics.md")

// documentedMetricFamilies are the families the metrics reference's tables name in
// their first column; a prefix such as temporal_* names none.
func documentedMetricFamilies(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(metricsReferencePath)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1]
		for _, name := range metricName.FindAllString(first, -1) {
			if strings.HasSuffix(name, "_") {
				continue // a prefix such as temporal_*
			}
			seen[seriesSuffix.ReplaceAllString(name, "")] = true
		}
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
