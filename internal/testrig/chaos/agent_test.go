package chaos_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
)

// busyAgent waits until an agent of mode runs a command and returns it.
func busyAgent(sc *scene, mode string) *faultenv.Agent {
	var agent *faultenv.Agent
	require.Eventually(sc.t, func() bool {
		for _, a := range sc.c.Agents {
			if a.Mode != mode {
				continue
			}
			var running int
			if err := sc.c.Pool.QueryRow(sc.c.Ctx, `SELECT count(*) FROM command_queue q JOIN targets t ON t.id = q.target_id
				WHERE t.name = $1 AND q.status = 'running'`, a.Name).Scan(&running); err == nil && running > 0 {
				agent = a
				return true
			}
		}
		return false
	}, time.Minute, 50*time.Millisecond, "no %s agent ever ran a command", mode)
	return agent
}

// An agent SIGKILLed mid-command and started again: the command it was running is
// not run again; only deployments on its target may fail, saying why.
func TestAgentKilledMidCommand(t *testing.T) {
	full(t)
	scenario(t, "agent SIGKILL mid-command", "a poll agent SIGKILLed running 5 s commands, restarted",
		faultenv.Options{}, faultenv.WorkloadOptions{CommandSleep: 5 * time.Second},
		func(sc *scene) (time.Time, faultenv.Rule) {
			a := busyAgent(sc, "poll")
			a.Kill()
			require.NoError(t, a.Start())
			return time.Now(), faultenv.FailedOnlyOn(a.Name)
		})
}

// An agent finishes its commands while it cannot reach Thorax, is SIGKILLed before it
// reports, and is started again: it reports the journaled results once, and nothing
// runs twice.
func TestAgentRestartedBeforeReporting(t *testing.T) {
	full(t)
	scenario(t, "agent restart before report", "agent↔Thorax cut, a poll agent finishes, SIGKILL, restart, link back",
		faultenv.Options{}, faultenv.WorkloadOptions{CommandSleep: 3 * time.Second},
		func(sc *scene) (time.Time, faultenv.Rule) {
			a := busyAgent(sc, "poll")
			ledger := filepath.Join(sc.c.LedgerDir, a.Name)
			before := fileSize(ledger)
			sc.c.AgentLink.Cut()
			// Its running command finishes (and a ledger line or more is written) while
			// the link is down: the result waits in the journal.
			<-time.After(5 * time.Second)
			require.GreaterOrEqual(t, fileSize(ledger), before)
			a.Kill()
			require.NoError(t, a.Start())
			sc.c.AgentLink.Restore()
			return time.Now(), faultenv.AllSucceed
		})
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}
