package testenv

import (
	"crypto/rand"
	"encoding/hex"
	"testing"
)

// Temporal is a dev server's frontend address and namespace, with a task queue name of
// the test's own.
type Temporal struct {
	Address   string
	Namespace string
	TaskQueue string
	// Kind is "server" for a production temporal-server, "dev" for the dev server.
	Kind string
}

// TemporalServer returns the shared Temporal server (the dev server unless the
// stack runs a production one).
func TemporalServer(t testing.TB) Temporal {
	t.Helper()
	e := env(t, "temporal")
	var r [6]byte
	_, _ = rand.Read(r[:])
	kind := e["MANTIS_TEMPORAL_KIND"]
	if kind == "" {
		kind = "dev"
	}
	return Temporal{Address: e["TEMPORAL_ADDRESS"], Namespace: e["TEMPORAL_NAMESPACE"], TaskQueue: "test-" + hex.EncodeToString(r[:]), Kind: kind}
}
