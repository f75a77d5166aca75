package faultenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// APIToken is the HTTP API token of the cluster's replicas.
const APIToken = "fault-token-0123456789abcdef"

// Timing of the cluster. The heartbeat timeout sits between the suite's short cut
// (10 s) and its long one (30 s).
const (
	HeartbeatTimeout  = 15 * time.Second
	processingTimeout = "60s"
	startTimeout      = 2 * time.Minute
)

// Options shapes a cluster; zero fields take the suite's sizes (3, 2, 10, 10).
type Options struct {
	Replicas, Thoraxes, PollAgents, ListenAgents int
	// Metrics gives each Thorax and agent a [metrics] listener (MetricsAddr).
	Metrics bool
}

func (o Options) withDefaults() Options {
	if o.Replicas == 0 {
		o.Replicas = 3
	}
	if o.Thoraxes == 0 {
		o.Thoraxes = 2
	}
	if o.PollAgents == 0 && o.ListenAgents == 0 {
		o.PollAgents, o.ListenAgents = 10, 10
	}
	return o
}

// Mandible is one replica.
type Mandible struct {
	*Proc
	ID, HTTPAddr, GRPCAddr string
}

// Thorax is one instance and the link its Mandible traffic goes through.
type Thorax struct {
	*Proc
	AgentsAddr string
	// MetricsAddr serves /metrics when Options.Metrics is set.
	MetricsAddr string
	// Link carries this instance's gRPC calls to Mandible.
	Link *Link
}

// Agent is one agent process; its name is its target's.
type Agent struct {
	*Proc
	Mode string
	// Thorax is the index of the instance a poll agent calls first (see newPollAgent).
	Thorax int
	// JournalDir holds its run journal.
	JournalDir string
	// MetricsAddr serves /metrics when Options.Metrics is set.
	MetricsAddr string
}

// Cluster is a running set of Mantis processes on the fault stack: a database, a
// vhost and a deployment task queue of its own.
type Cluster struct {
	t       testing.TB
	Ctx     context.Context
	Dir     string
	Servers *Servers
	Certs   devcerts.Bundle
	DBURL   string
	Pool    *pgxpool.Pool
	Broker  Broker
	queue   string
	opts    Options

	Mandibles []*Mandible
	Thoraxes  []*Thorax
	Agents    []*Agent
	// AgentLink carries every agent↔Thorax connection, both directions.
	AgentLink *Link
	// LedgerDir holds one ledger file per target.
	LedgerDir string
	// listenProxy is the address each listen target is registered with: a proxy of
	// AgentLink in front of the agent.
	listenProxy map[string]string
	// ports are the ports freeAddr has handed out, so that no two processes are given
	// the same one; shared by the views of the cluster (For).
	ports *portSet
}

// portSet is the set of ports handed out.
type portSet struct {
	mu    sync.Mutex
	taken map[int]bool
}

// StartCluster starts replicas, Thorax instances and agents on the fault stack and
// waits until every target is registered and assigned.
func StartCluster(t testing.TB, s *Servers, o Options) *Cluster {
	t.Helper()
	c := startProcesses(t, s, o.withDefaults())
	c.registerTargets()
	return c
}

// startProcesses migrates a database of its own and starts o's replicas, then its
// Thorax instances once the replicas are healthy, then its agents once every Thorax
// registered.
func startProcesses(t testing.TB, s *Servers, o Options) *Cluster {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	c := &Cluster{t: t, Ctx: context.Background(), Dir: dir, Servers: s, Certs: certs,
		DBURL: s.Database(t), Broker: s.VHost(t), queue: "deployments-" + randomHex(4),
		opts: o, AgentLink: NewLink("agent-thorax"), listenProxy: map[string]string{}, ports: &portSet{taken: map[int]bool{}}, LedgerDir: filepath.Join(dir, "ledger")}
	require.NoError(t, os.MkdirAll(c.LedgerDir, 0o777))
	require.NoError(t, os.Chmod(c.LedgerDir, 0o777))
	c.Pool, err = pgxpool.New(c.Ctx, c.DBURL)
	require.NoError(t, err)
	t.Cleanup(c.Pool.Close)
	_, err = schema.Migrate(c.Ctx, c.Pool)
	require.NoError(t, err)

	for i := range o.Replicas {
		c.Mandibles = append(c.Mandibles, c.newMandible(i))
	}
	c.startAll(mandibleProcs(c.Mandibles))
	c.WaitHealthy(c.Mandibles...)
	grpcAddrs := make([]string, len(c.Mandibles))
	for i, m := range c.Mandibles {
		grpcAddrs[i] = m.GRPCAddr
	}
	for i := range o.Thoraxes {
		c.Thoraxes = append(c.Thoraxes, c.newThorax(i, grpcAddrs))
	}
	c.startAll(thoraxProcs(c.Thoraxes))
	for _, th := range c.Thoraxes {
		c.WaitRegistered(th)
	}
	for i := range o.PollAgents {
		c.Agents = append(c.Agents, c.newPollAgent(i, i%len(c.Thoraxes)))
	}
	for i := range o.ListenAgents {
		c.Agents = append(c.Agents, c.newListenAgent(i))
	}
	c.startAll(agentProcs(c.Agents))
	return c
}

func mandibleProcs(ms []*Mandible) []*Proc {
	out := make([]*Proc, len(ms))
	for i, m := range ms {
		out[i] = m.Proc
	}
	return out
}

func thoraxProcs(ts []*Thorax) []*Proc {
	out := make([]*Proc, len(ts))
	for i, th := range ts {
		out[i] = th.Proc
	}
	return out
}

func agentProcs(as []*Agent) []*Proc {
	out := make([]*Proc, len(as))
	for i, a := range as {
		out[i] = a.Proc
	}
	return out
}

func (c *Cluster) startAll(procs []*Proc) {
	c.t.Helper()
	for _, p := range procs {
		require.NoError(c.t, p.Start())
		p.cleanup(c.t)
	}
}

// proc writes config to the cluster's directory and describes a process running
// binary with it.
func (c *Cluster) proc(name, binary, config string) *Proc {
	c.t.Helper()
	confPath := filepath.Join(c.Dir, name+".toml")
	require.NoError(c.t, os.WriteFile(confPath, []byte(config), 0o600))
	return newProc(name, testenv.Binary(c.t, binary), c.Dir, filepath.Join(c.Dir, name+".log"), []string{"--config", confPath}, nil)
}

// freeAddr returns a loopback address for a process of the cluster to listen on. The
// port is below the kernel's ephemeral range, from which the link proxies' listeners
// and every outgoing connection draw theirs, so none of them can take it between now
// and the process's bind; and it is one the cluster has not handed out before. (Two
// listen agents once drew the same ephemeral port: one failed to bind, and Thorax's
// calls to it reached the other, which refused them as the wrong target.)
func (c *Cluster) freeAddr() string {
	c.t.Helper()
	c.ports.mu.Lock()
	defer c.ports.mu.Unlock()
	for {
		port, err := devstack.FreePort(true)
		require.NoError(c.t, err)
		if !c.ports.taken[port] {
			c.ports.taken[port] = true
			return fmt.Sprintf("127.0.0.1:%d", port)
		}
	}
}

// WaitRegistered waits until th is a live instance and returns its id.
func (c *Cluster) WaitRegistered(th *Thorax) uuid.UUID {
	c.t.Helper()
	var id uuid.UUID
	require.EventuallyWithT(c.t, func(ct *assert.CollectT) {
		require.True(ct, th.Running(), "%s exited", th.Name)
		require.NoError(ct, c.Pool.QueryRow(c.Ctx,
			`SELECT id FROM thorax_instances WHERE name = $1 AND status = 'live' ORDER BY registered_at DESC LIMIT 1`, th.Name).Scan(&id))
	}, startTimeout, 200*time.Millisecond, "%s never registered", th.Name)
	return id
}

// InstanceID is the id of th's latest registration.
func (c *Cluster) InstanceID(th *Thorax) uuid.UUID {
	c.t.Helper()
	var id uuid.UUID
	require.NoError(c.t, c.Pool.QueryRow(c.Ctx,
		`SELECT id FROM thorax_instances WHERE name = $1 ORDER BY registered_at DESC LIMIT 1`, th.Name).Scan(&id))
	return id
}

// TargetNames lists the agents' names.
func (c *Cluster) TargetNames() []string {
	names := make([]string, len(c.Agents))
	for i, a := range c.Agents {
		names[i] = a.Name
	}
	return names
}

// registerTargets registers the listen targets through the API and waits until every
// target has an instance.
func (c *Cluster) registerTargets() {
	c.t.Helper()
	for _, a := range c.Agents {
		if a.Mode != "listen" {
			continue
		}
		body := fmt.Sprintf(`{"name":%q,"mode":"listen","address":%q}`, a.Name, c.listenProxy[a.Name])
		code, out := c.API("POST", "/api/v1/targets", body)
		require.Less(c.t, code, 300, "registering %s: %v", a.Name, out)
	}
	names := c.TargetNames()
	require.EventuallyWithT(c.t, func(ct *assert.CollectT) {
		var assigned int
		require.NoError(ct, c.Pool.QueryRow(c.Ctx,
			`SELECT count(*) FROM targets WHERE name = ANY($1) AND assigned_instance_id IS NOT NULL`, names).Scan(&assigned))
		require.Equal(ct, len(names), assigned)
	}, startTimeout, 200*time.Millisecond, "not every target was registered and assigned")
}

// Logs is the tail of every process's log, for a failing test.
func (c *Cluster) Logs(n int) string {
	var b strings.Builder
	var procs []*Proc
	procs = append(procs, mandibleProcs(c.Mandibles)...)
	procs = append(procs, thoraxProcs(c.Thoraxes)...)
	for _, p := range procs {
		fmt.Fprintf(&b, "==== %s\n%s\n", p.Name, tail(p.Log(), n))
	}
	return b.String()
}
