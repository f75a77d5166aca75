package testenv

import (
	"os"
	"testing"
)

// Kinds of Temporal server a stack runs (MANTIS_TEMPORAL_KIND in stack.env).
const (
	// TemporalKindServer is a production temporal-server (PostgreSQL persistence).
	TemporalKindServer = "server"
	// TemporalKindDev is the temporal CLI's dev server (SQLite).
	TemporalKindDev = "dev"
)

// RequireTemporalServerEnv, set to 1, says the run is the production-server job
// (make test-temporal-server): its tests must not pass against the dev server.
const RequireTemporalServerEnv = "MANTIS_REQUIRE_TEMPORAL_SERVER"

// RequireWantedKind fails the test when the run requires a production temporal-server
// and srv is another kind, so that the job cannot pass on the wrong server.
func (s Temporal) RequireWantedKind(t testing.TB) {
	t.Helper()
	if os.Getenv(RequireTemporalServerEnv) == "1" && s.Kind != TemporalKindServer {
		t.Fatalf("%s=1 but the stack's Temporal at %s is the %q kind, not %q (is MANTIS_TEMPORAL_KIND=server in its stack.env?)",
			RequireTemporalServerEnv, s.Address, s.Kind, TemporalKindServer)
	}
}
