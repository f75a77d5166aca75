package scale_test

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/scale"
)

func TestParseStatCountsFieldsAfterTheLastParenthesis(t *testing.T) {
	// A command name with a space and a ')' must not shift the fields.
	line := []byte("4242 (my) proc) S 1 4240 4240 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 100 0 0\n")
	st, err := scale.ParseStat(line)
	require.NoError(t, err)
	require.Equal(t, 4242, st.Pid)
	require.Equal(t, 1, st.PPid)
	require.Equal(t, 3*time.Second, st.Own, "utime 250 + stime 50 ticks")
	require.Equal(t, 100*time.Millisecond, st.Children, "cutime 7 + cstime 3 ticks")
}

func TestParseStatRefusesATruncatedLine(t *testing.T) {
	_, err := scale.ParseStat([]byte("1 (init) S 0 1"))
	require.Error(t, err)
	_, err = scale.ParseStat([]byte("no name here"))
	require.Error(t, err)
}

func TestTreeAddsDescendantsAndTheirReapedChildren(t *testing.T) {
	snap := scale.NewSnapshot([]scale.ProcStat{
		{Pid: 10, PPid: 1, Own: time.Second, Children: 2 * time.Second},
		{Pid: 11, PPid: 10, Own: 3 * time.Second},
		{Pid: 12, PPid: 11, Own: 4 * time.Second, Children: 5 * time.Second},
		{Pid: 20, PPid: 1, Own: 100 * time.Second},
	})
	require.Equal(t, 15*time.Second, snap.Tree(10))
	require.Equal(t, 12*time.Second, snap.Tree(11))
	require.Zero(t, snap.Tree(99), "a process that is gone")
}

// A live descendant in a session of its own, as PostgreSQL's backends are, counts
// for the root: following the process group would miss it.
func TestTreeFollowsADescendantInItsOwnSession(t *testing.T) {
	busy := `i=0; while [ $i -lt 400000 ]; do i=$((i+1)); done`
	cmd := exec.Command("sh", "-c", "setsid sh -c '"+busy+"; exec sleep 60' & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	require.Eventually(t, func() bool {
		snap, err := scale.ReadSnapshot()
		require.NoError(t, err)
		// The shell itself hardly runs: the CPU is its child's, in another session
		// and still alive. The loop takes far more than 250 ms.
		return snap.Tree(cmd.Process.Pid) >= 250*time.Millisecond
	}, time.Minute, 50*time.Millisecond)
	own, err := scale.OwnCPU()
	require.NoError(t, err)
	require.Positive(t, own)
}
