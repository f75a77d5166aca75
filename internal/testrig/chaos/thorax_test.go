package chaos_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
)

// listenHolder is the Thorax holding the most listen targets, and its instance id.
func listenHolder(sc *scene) (*faultenv.Thorax, uuid.UUID) {
	var id uuid.UUID
	require.NoError(sc.t, sc.c.Pool.QueryRow(sc.c.Ctx, `SELECT assigned_instance_id FROM targets
		WHERE mode = 'listen' GROUP BY assigned_instance_id ORDER BY count(*) DESC LIMIT 1`).Scan(&id))
	for _, th := range sc.c.Thoraxes {
		if sc.c.InstanceID(th) == id {
			return th, id
		}
	}
	sc.t.Fatalf("no Thorax process has instance %s", id)
	return nil, id
}

// waitDead waits until Mandible declares instance dead and returns when it did.
func waitDead(sc *scene, instance uuid.UUID) time.Time {
	var died time.Time
	require.Eventually(sc.t, func() bool {
		return sc.c.Pool.QueryRow(sc.c.Ctx, `SELECT died_at FROM thorax_instances WHERE id = $1 AND status = 'dead'`, instance).Scan(&died) == nil
	}, 2*faultenv.HeartbeatTimeout+time.Minute, 200*time.Millisecond, "instance %s never declared dead", instance)
	return died
}

// A Thorax with listen targets is SIGKILLed: by the seed's rule its targets are
// reassigned and its in-flight deployments failed, no others.
func TestThoraxKilledWithListenTargets(t *testing.T) {
	full(t)
	scenario(t, "Thorax SIGKILL", "a Thorax holding listen targets SIGKILLed", faultenv.Options{}, faultenv.WorkloadOptions{},
		func(sc *scene) (time.Time, faultenv.Rule) {
			th, id := listenHolder(sc)
			th.Kill()
			return waitDead(sc, id), faultenv.FailedOnlyWith(id)
		})
}

// A Thorax drained with SIGTERM fails nothing.
func TestThoraxDrained(t *testing.T) {
	full(t)
	scenario(t, "Thorax drained", "a Thorax SIGTERMed (drain), started again", faultenv.Options{}, faultenv.WorkloadOptions{},
		func(sc *scene) (time.Time, faultenv.Rule) {
			th, _ := listenHolder(sc)
			require.True(t, th.Stop(time.Minute), "%s did not drain within a minute", th.Name)
			require.NoError(t, th.Start())
			sc.c.WaitRegistered(th)
			return time.Now(), faultenv.AllSucceed
		})
}

// Two at once: the broker is SIGKILLed while a Thorax is SIGKILLed.
func TestBrokerAndThoraxKilled(t *testing.T) {
	full(t)
	scenario(t, "broker + Thorax SIGKILL", "RabbitMQ SIGKILL and a Thorax SIGKILL together", faultenv.Options{}, faultenv.WorkloadOptions{},
		func(sc *scene) (time.Time, faultenv.Rule) {
			th, id := listenHolder(sc)
			require.NoError(t, sc.s.Kill(devstack.ServerRabbitMQ))
			th.Kill()
			require.NoError(t, sc.s.RestartServer(devstack.ServerRabbitMQ))
			died := waitDead(sc, id)
			return died, faultenv.FailedOnlyWith(id)
		})
}

// The Thorax↔Mandible link of one Thorax is delayed 2 s, then cut 10 s (under the
// heartbeat timeout: nothing fails), then cut 30 s (over it: that Thorax is declared
// dead and its in-flight deployments fail, by the seed's rule).
func TestThoraxMandibleLinkFaults(t *testing.T) {
	full(t)
	scenario(t, "Thorax↔Mandible link", "2 s delay 15 s, 10 s cut, 30 s cut", faultenv.Options{}, faultenv.WorkloadOptions{},
		func(sc *scene) (time.Time, faultenv.Rule) {
			th := sc.c.Thoraxes[0]
			id := sc.c.InstanceID(th)
			linkFaults(th.Link)
			return time.Now(), faultenv.FailedOnlyWith(id)
		})
}

// Every agent↔Thorax connection is delayed 2 s, then cut 10 s, then cut 30 s: results
// are retried until acknowledged, and nothing is lost or run twice.
func TestAgentThoraxLinkFaults(t *testing.T) {
	full(t)
	scenario(t, "agent↔Thorax link", "2 s delay 15 s, 10 s cut, 30 s cut", faultenv.Options{}, faultenv.WorkloadOptions{},
		func(sc *scene) (time.Time, faultenv.Rule) {
			linkFaults(sc.c.AgentLink)
			return time.Now(), faultenv.AllSucceed
		})
}

// linkFaults runs the link sequence: a 2 s delay for 15 s, a 10 s cut, 10 s of
// health, a 30 s cut.
func linkFaults(l *faultenv.Link) {
	l.Delay(2 * time.Second)
	<-time.After(15 * time.Second)
	l.Restore()
	l.Cut()
	<-time.After(10 * time.Second)
	l.Restore()
	<-time.After(10 * time.Second)
	l.Cut()
	<-time.After(30 * time.Second)
	l.Restore()
}
