package soak_test

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/soak"
)

// A server's CPU is mostly in the processes it forks (PostgreSQL's backends), so a
// tree's CPU must count its descendants, not only the process named.
func TestTreeCPUCountsDescendants(t *testing.T) {
	// An idle shell whose child spins.
	cmd := exec.Command("sh", "-c", `sh -c 'while :; do :; done' & wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	require.Eventually(t, func() bool {
		tree, err := soak.TreeCPU(cmd.Process.Pid)
		return err == nil && tree >= 200*time.Millisecond
	}, 30*time.Second, 50*time.Millisecond, "the spinning child's CPU is counted in its parent's tree")
	self, err := soak.ProcessCPU(cmd.Process.Pid)
	require.NoError(t, err)
	require.Less(t, self, 100*time.Millisecond, "the parent shell itself idles")
}

func TestTreeCPURefusesAProcessThatIsNotRunning(t *testing.T) {
	_, err := soak.TreeCPU(0)
	require.ErrorContains(t, err, "not running")
}

func TestMachineCPUGrows(t *testing.T) {
	first, err := soak.MachineCPU()
	require.NoError(t, err)
	require.Positive(t, first)
	require.Eventually(t, func() bool {
		now, err := soak.MachineCPU()
		return err == nil && now > first
	}, 10*time.Second, 10*time.Millisecond)
}

func TestCPUUsesShareWhatTheGroupsDidNotUse(t *testing.T) {
	groups := []soak.CPUGroup{{Name: "a"}, {Name: "b"}}
	before := soak.CPUReading{"a": time.Second, "b": 0, soak.MachineGroup: 10 * time.Second}
	after := soak.CPUReading{"a": 3 * time.Second, "b": time.Second, soak.MachineGroup: 15 * time.Second}
	uses := soak.CPUUses(groups, before, after, 10*time.Second, 100)
	require.Equal(t, []soak.CPUUse{
		{Group: "a", CPU: 2 * time.Second, Cores: 0.2, PerRequest: 20 * time.Millisecond},
		{Group: "b", CPU: time.Second, Cores: 0.1, PerRequest: 10 * time.Millisecond},
		{Group: soak.MachineGroup, CPU: 5 * time.Second, Cores: 0.5, PerRequest: 50 * time.Millisecond},
		{Group: "outside the cluster", CPU: 2 * time.Second, Cores: 0.2, PerRequest: 20 * time.Millisecond},
	}, uses)
}
