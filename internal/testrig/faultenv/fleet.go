package faultenv

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
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
	c := startProcesses(t, s, o.withDefaults())
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
