package chaos_test

import (
	"testing"
	"time"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
)

// fastScenario is a scenario of the fast subset: its subtest name, its row and its
// fault.
type fastScenario struct {
	test, name, fault string
	inject            func(sc *scene) (time.Time, faultenv.Rule)
}

// temporalDownFor is how long Temporal stays down after its kill -9: long enough for
// every worker's poll and every activity's heartbeat to fail.
const temporalDownFor = 10 * time.Second

// fastScenarios are the scenarios `go test` (and so `make test`) runs, in the order
// they run. The replica kill comes last: it leaves that replica down.
var fastScenarios = []fastScenario{
	{"BrokerKilled", "broker kill -9", "RabbitMQ SIGKILL, restarted on its data", killAndRestart(devstack.ServerRabbitMQ)},
	{"PostgresCrashRestart", "PostgreSQL crash restart", "pg_ctl stop -m immediate, start", postgresRestart(devstack.PostgresStopImmediate)},
	{"TemporalKilled", "Temporal kill -9", "SIGKILL, restarted 10 s later on its data", killWaitRestart(devstack.ServerTemporal, temporalDownFor)},
	{"MandibleKilledMidClaim", "Mandible SIGKILL mid-claim", "1 of 3 replicas SIGKILLed holding claims", killClaimHolder},
}

// TestFastSubset runs the fast subset one scenario after the other on one cluster
// (3 replicas, 2 Thorax, 20 agents), which saves a cluster start per scenario. Each
// scenario has a workload of its own and is checked on its own: it starts once the
// previous one's check saw every deployment, request and command ended, the servers
// are up and every Thorax is live again, so that no fault spills into the next row.
func TestFastSubset(t *testing.T) {
	began := time.Now()
	s := faultStack(t)
	c := faultenv.StartCluster(t, s, faultenv.Options{})
	t.Logf("cluster up after %s", time.Since(began).Round(time.Second))
	for _, f := range fastScenarios {
		ok := t.Run(f.test, func(t *testing.T) {
			t.Cleanup(func() { heal(t, s) })
			view := c.For(t)
			whole(view)
			name := f.name
			if s.TemporalKind() == "server" {
				name += " (temporal-server " + devstack.TemporalServerVersion + ", PostgreSQL)"
			}
			runOn(t, s, view, name, f.fault, faultenv.WorkloadOptions{}, f.inject)
		})
		if !ok {
			t.Fatalf("scenario %s failed: the cluster may be broken, the rest of the subset is not run on it", f.name)
		}
	}
}

// whole waits until every running replica answers and every Thorax is live.
func whole(c *faultenv.Cluster) {
	for _, m := range c.Mandibles {
		if m.Running() {
			c.WaitHealthy(m)
		}
	}
	for _, th := range c.Thoraxes {
		c.WaitRegistered(th)
	}
}
