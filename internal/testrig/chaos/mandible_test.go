package chaos_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
)

// killClaimHolder SIGKILLs one of three replicas while it holds claimed requests;
// the survivors reclaim them and every deployment succeeds.
func killClaimHolder(sc *scene) (time.Time, faultenv.Rule) {
	t := sc.t
	var victim *faultenv.Mandible
	require.Eventually(t, func() bool {
		var holder string
		if err := sc.c.Pool.QueryRow(sc.c.Ctx, `SELECT claimed_by FROM pending_dispatch_requests
					WHERE status = 'processing' LIMIT 1`).Scan(&holder); err != nil {
			return false
		}
		for _, m := range sc.c.Mandibles {
			if m.ID == holder {
				victim = m
			}
		}
		return victim != nil
	}, time.Minute, 20*time.Millisecond, "no replica was ever seen holding a claim")
	require.NoError(t, victim.Signal(syscall.SIGKILL))
	victim.Kill()
	return time.Now(), faultenv.AllSucceed
}

// The only replica is SIGKILLed and started again on the same configuration.
func TestOnlyMandibleKilledAndRestarted(t *testing.T) {
	full(t)
	scenario(t, "only Mandible SIGKILL", "the only replica SIGKILLed, restarted", faultenv.Options{Replicas: 1}, faultenv.WorkloadOptions{},
		func(sc *scene) (time.Time, faultenv.Rule) {
			m := sc.c.Mandibles[0]
			m.Kill()
			require.NoError(t, m.Start())
			sc.c.WaitHealthy(m)
			return time.Now(), faultenv.AllSucceed
		})
}
