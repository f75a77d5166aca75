package faultenv

import "testing"

// For returns the cluster as seen by t, a test that runs on a cluster another test
// started (the fast subset runs its scenarios one after the other on one cluster):
// the same processes, servers and database, with t's failures and cleanups. The
// processes stay the starting test's, and stop when it ends.
func (c *Cluster) For(t testing.TB) *Cluster {
	view := *c
	view.t = t
	return &view
}
