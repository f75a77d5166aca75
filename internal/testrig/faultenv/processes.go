package faultenv

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/identity"
)

// apiTimeout bounds one HTTP API call of the harness.
const apiTimeout = 15 * time.Second

var apiClient = &http.Client{Timeout: apiTimeout}

// newMandible describes replica i: gRPC on mutual TLS, the broker on, the suite's
// heartbeat timeout, and the cluster's deployment task queue.
func (c *Cluster) newMandible(i int) *Mandible {
	c.t.Helper()
	m := &Mandible{ID: fmt.Sprintf("mandible-%d-%s", i, randomHex(3)), HTTPAddr: c.freeAddr(), GRPCAddr: c.freeAddr()}
	cert, key := c.Certs.Pair("mandible")
	conf := fmt.Sprintf(`replica_id = %q
[log]
level = "info"
[database]
url = %q
max_conns = 8
[temporal]
address = %q
namespace = "default"
deployment_task_queue = %q
[http]
listen = %q
tokens = [%q]
[grpc]
listen = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[dispatch]
poll_interval = "2s"
processing_timeout = %q
[thorax]
heartbeat_timeout = %q
`, m.ID, c.DBURL, c.Servers.TemporalAddress(), c.queue, m.HTTPAddr, APIToken, m.GRPCAddr,
		c.Certs.CACert(), cert, key, processingTimeout, HeartbeatTimeout.String()) + c.queueSection()
	m.Proc = c.proc(m.ID, "mandible", conf)
	return m
}

// WaitHealthy waits until each replica answers /healthz.
func (c *Cluster) WaitHealthy(ms ...*Mandible) {
	c.t.Helper()
	for _, m := range ms {
		require.Eventually(c.t, func() bool {
			require.True(c.t, m.Running(), "replica %s exited during start-up:\n%s", m.ID, tail(m.Log(), 3000))
			resp, err := apiClient.Get("http://" + m.HTTPAddr + "/healthz")
			if err != nil {
				return false
			}
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}, startTimeout, 200*time.Millisecond, "replica %s never became healthy", m.ID)
	}
}

// newThorax describes instance i, calling Mandible through a link of its own that
// spreads over every replica.
func (c *Cluster) newThorax(i int, mandibles []string) *Thorax {
	c.t.Helper()
	name := fmt.Sprintf("thorax-%d-%s", i, randomHex(3))
	th := &Thorax{AgentsAddr: c.freeAddr(), Link: NewLink(name + "-mandible")}
	cert, key := c.Certs.Pair("thorax")
	conf := fmt.Sprintf(`name = %q
[log]
level = "info"
[mandible]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[polling]
interval = "1s"
fallback_interval = "1s"
[heartbeat]
interval = "1s"
[agents]
listen = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[drain]
timeout = "20s"
`, name, th.Link.Proxy(c.t, mandibles...), c.Certs.CACert(), cert, key,
		th.AgentsAddr, c.Certs.CACert(), cert, key)
	conf += c.queueSection() + "prefetch_count = 10\n"
	th.Proc = c.proc(name, "thorax", conf+c.metricsSection(&th.MetricsAddr))
	return th
}

// queueSection is the [queue] section of Mandible and Thorax: the cluster's broker
// over TLS with the client pair.
func (c *Cluster) queueSection() string {
	b := c.Broker
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
`, b.Host, b.Port, b.User, b.Password, b.VHost, b.CACert, b.ClientCert, b.Key)
}

// agentExec is the agents' [exec] section: a short kill grace, so that a stopped
// command's group is gone soon.
const agentExec = `[exec]
max_concurrent = 4
kill_grace = "1s"
stop_timeout = "2s"
`

// agentPair issues the certificate pair of the agent of target name: Thorax lets an
// agent poll and report only for the target its certificate names.
func (c *Cluster) agentPair(name string) (cert, key string) {
	c.t.Helper()
	cert, key, err := c.Certs.Issue(identity.RoleAgent, name, nil)
	require.NoError(c.t, err)
	return cert, key
}

// newPollAgent describes poll agent i, calling the Thorax pool through the agent link
// as agents call a load-balanced address in production (the Helm chart's Thorax
// Service): its first connection reaches Thorax th, and a reconnect after that Thorax
// is gone reaches another.
func (c *Cluster) newPollAgent(i, th int) *Agent {
	c.t.Helper()
	name := fmt.Sprintf("poll-%02d-%s", i, randomHex(3))
	a := &Agent{Mode: "poll", Thorax: th, JournalDir: filepath.Join(c.Dir, name, "journal")}
	cert, key := c.agentPair(name)
	conf := fmt.Sprintf(`name = %q
mode = "poll"
[thorax]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[journal]
dir = %q
`, name, c.AgentLink.Proxy(c.t, c.thoraxPool(th)...), c.Certs.CACert(), cert, key, a.JournalDir) + agentExec
	a.Proc = c.proc(name, "agent", conf+c.metricsSection(&a.MetricsAddr))
	return a
}

// thoraxPool lists every Thorax's agents address, starting with th's.
func (c *Cluster) thoraxPool(th int) []string {
	out := make([]string, 0, len(c.Thoraxes))
	for i := range c.Thoraxes {
		out = append(out, c.Thoraxes[(th+i)%len(c.Thoraxes)].AgentsAddr)
	}
	return out
}

// newListenAgent describes listen agent i; Thorax reaches it through the agent link.
func (c *Cluster) newListenAgent(i int) *Agent {
	c.t.Helper()
	name := fmt.Sprintf("listen-%02d-%s", i, randomHex(3))
	a := &Agent{Mode: "listen", Thorax: -1, JournalDir: filepath.Join(c.Dir, name, "journal")}
	addr := c.freeAddr()
	c.listenProxy[name] = c.AgentLink.Proxy(c.t, addr)
	cert, key := c.agentPair(name)
	conf := fmt.Sprintf(`name = %q
mode = "listen"
[listen]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
allowed_client_names = ["thorax"]
[journal]
dir = %q
`, name, addr, c.Certs.CACert(), cert, key, a.JournalDir) + agentExec
	a.Proc = c.proc(name, "agent", conf+c.metricsSection(&a.MetricsAddr))
	return a
}

// API calls the HTTP API of the first running replica that answers, and returns the
// status and decoded body; code 0 means no replica answered.
func (c *Cluster) API(method, path, body string) (int, map[string]any) {
	for _, m := range c.Mandibles {
		if !m.Running() {
			continue
		}
		code, out, err := callAPI(m.HTTPAddr, method, path, body)
		if err == nil {
			return code, out
		}
	}
	return 0, nil
}

func callAPI(addr, method, path, body string) (int, map[string]any, error) {
	req, err := http.NewRequest(method, "http://"+addr+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+APIToken)
	resp, err := apiClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, err
	}
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			out = map[string]any{"raw": string(raw)}
		}
	}
	return resp.StatusCode, out, nil
}

// metricsSection is the [metrics] section of a Thorax or agent when the cluster's
// Options ask for metrics listeners, storing the address in addr; "" otherwise.
func (c *Cluster) metricsSection(addr *string) string {
	if !c.opts.Metrics {
		return ""
	}
	*addr = c.freeAddr()
	return fmt.Sprintf("[metrics]\nlisten = %q\n", *addr)
}
