package faultenv

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/schema"
)

// fleetPoll is how often StartFleet counts the assigned targets.
const fleetPoll = time.Second

// StartFleet starts replicas, Thorax instances and poll agents as StartCluster does,
// then waits up to assignTimeout for the agents' targets to be assigned and returns
// the names of those that were, instead of failing: a scale run on a loaded machine
// measures the fleet that came up, and says how much of it did. Listen agents are
// not started.
func StartFleet(t testing.TB, s *Servers, o Options, assignTimeout time.Duration) (*Cluster, []string) {
	t.Helper()
	o.ListenAgents = 0
	o = o.withDefaults()
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	certs, err := devcerts.Generate(filepath.Join(dir, "certs"), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	c := &Cluster{t: t, Ctx: context.Background(), Dir: dir, Servers: s, Certs: certs,
		DBURL: s.Database(t), Broker: s.VHost(t), queue: "deployments-" + randomHex(4),
		opts: o, AgentLink: NewLink("agent-thorax"), listenProxy: map[string]string{}, LedgerDir: filepath.Join(dir, "ledger")}
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
	c.startAll(agentProcs(c.Agents))
	return c, c.waitAssigned(assignTimeout)
}

// waitAssigned waits until every agent's target is assigned or timeout passes, and
// returns the assigned ones.
func (c *Cluster) waitAssigned(timeout time.Duration) []string {
	c.t.Helper()
	names := c.TargetNames()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(fleetPoll)
	defer tick.Stop()
	var assigned []string
	for range tick.C {
		rows, err := c.Pool.Query(c.Ctx, `SELECT name FROM targets WHERE name = ANY($1) AND assigned_instance_id IS NOT NULL ORDER BY name`, names)
		require.NoError(c.t, err, "listing assigned targets")
		var got []string
		for rows.Next() {
			var n string
			require.NoError(c.t, rows.Scan(&n))
			got = append(got, n)
		}
		require.NoError(c.t, rows.Err())
		assigned = got
		if len(assigned) == len(names) || time.Now().After(deadline) {
			break
		}
	}
	return assigned
}
