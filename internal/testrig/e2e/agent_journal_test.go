package e2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/schema"
)

// startJournaledPollAgent starts a poll-mode agent named name, polling th and
// journaling in journalDir, so that the test can start it again on the same
// journal as a restarted agent.
func (c *execCluster) startJournaledPollAgent(t *testing.T, th *thoraxProcess, name, journalDir string) *mantisProcess {
	t.Helper()
	cert, key := c.issue(t, identity.RoleAgent, name)
	conf := fmt.Sprintf(`name = %q
mode = "poll"
[thorax]
address = %q
ca_cert_path = %q
cert_path = %q
key_path = %q
[journal]
dir = %q
`, name, th.AgentsAddr, c.certs.CACert(), cert, key, journalDir) + agentExecConfig
	return c.startProcess(t, name, testenv.Binary(t, "agent"), conf)
}

// The agent is SIGKILLed after its command finished but before Thorax took the
// result: Thorax is frozen (SIGSTOP) while the agent tries to report. The agent
// is started again on the same journal and Thorax thawed: the command ran
// exactly once, and its result reaches Mandible.
func TestAgentKilledBeforeItsResultWasTakenReportsItOnceRestarted(t *testing.T) {
	t.Parallel()
	// A heartbeat timeout well beyond the freeze: Thorax must not be declared
	// dead while it is stopped.
	c := setupExecCluster(t, 60*time.Second)
	th := c.startThorax(t)
	instance := c.waitRegistered(t, th)
	name, journalDir := uniqueName("journal"), filepath.Join(c.dir, "journal")
	agent := c.startJournaledPollAgent(t, th, name, journalDir)
	c.waitPollTarget(t, agent, instance)

	marker, gate := filepath.Join(c.dir, "runs"), filepath.Join(c.dir, "gate")
	require.NoError(t, syscall.Mkfifo(gate, 0o600))
	request := c.enqueue(t, schema.NewDispatchRequest{
		Target:  name,
		Command: fmt.Sprintf("echo run >> %s; cat %s; echo finished", marker, gate),
		Timeout: 2 * time.Minute,
	})
	w, err := os.OpenFile(gate, os.O_WRONLY, 0) // returns once the command runs
	require.NoError(t, err)

	require.NoError(t, syscall.Kill(th.Pid(), syscall.SIGSTOP))
	thawed := false
	thaw := func() {
		if !thawed {
			thawed = true
			_ = syscall.Kill(th.Pid(), syscall.SIGCONT)
		}
	}
	t.Cleanup(thaw) // a stopped Thorax would not stop on SIGTERM
	require.NoError(t, w.Close())
	require.Eventually(t, func() bool { return strings.Contains(agent.log(), "command finished") },
		30*time.Second, 20*time.Millisecond, "the command never finished:\n%s", agent.log())
	agent.kill(t) // between finishing and Thorax taking the result
	require.Equal(t, "run\n", readOptional(t, marker))
	if s, ok, err := c.command(request); err == nil && ok {
		require.NotEqual(t, "succeeded", s.Status, "no result can have been stored through a frozen thorax")
	}

	restarted := c.startJournaledPollAgent(t, th, name, journalDir)
	require.Eventually(t, func() bool { return strings.Contains(restarted.log(), "journal open") },
		startTimeout, 20*time.Millisecond, "the agent never started again:\n%s", restarted.log())
	thaw()

	s := c.waitCommand(t, request, 60*time.Second, "succeeded", "failed", "lost")
	require.Equal(t, "succeeded", s.Status, "error: %s\nagent:\n%s", deref(s.Error), restarted.log())
	require.NotNil(t, s.ExitCode)
	require.Equal(t, 0, *s.ExitCode)
	require.NotNil(t, s.Output)
	require.Equal(t, "finished\n", *s.Output)
	require.Contains(t, restarted.log(), "reporting results journaled before a restart")
	require.Equal(t, "run\n", readOptional(t, marker), "the command ran exactly once")
}

// readOptional returns the file's content, "" when it does not exist.
func readOptional(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}

// deref returns *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
