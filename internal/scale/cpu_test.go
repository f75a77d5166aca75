package scale_test

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/scale"
)

func TestParseStatCountsFieldsAfterTheLastParenthesis(t *testing.T) {
	// A command name with a space and a ')' must not shift the fields.
	line := []byte("4242 (my) proc) S 1 4240 4240 0 -1 4194560 100 0 0 0 250 50 7 3 20 0 1 0 100 0 0\n")
	st, err := scale.ParseStat(line)
	require.NoError(t, err)
	require.Equal(t, 4240, st.Pgrp)
	require.Equal(t, 3*time.Second, st.Own, "utime 250 + stime 50 ticks")
	require.Equal(t, 100*time.Millisecond, st.Children, "cutime 7 + cstime 3 ticks")
}

func TestParseStatRefusesATruncatedLine(t *testing.T) {
	_, err := scale.ParseStat([]byte("1 (init) S 0 1"))
	require.Error(t, err)
	_, err = scale.ParseStat([]byte("no name here"))
	require.Error(t, err)
}

// A busy process group's CPU shows in GroupCPU, including the CPU of a child that
// has already exited and been reaped inside the group.
func TestGroupCPUCountsALiveGroupAndItsReapedChildren(t *testing.T) {
	// The shell burns CPU in a child it waits for, then in itself, then sleeps.
	cmd := exec.Command("sh", "-c", `sh -c 'i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done'; i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done; exec sleep 60`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); _ = cmd.Wait() })
	before, err := scale.GroupCPU()
	require.NoError(t, err)
	require.Less(t, before[cmd.Process.Pid], 200*time.Millisecond)
	require.Eventually(t, func() bool {
		groups, err := scale.GroupCPU()
		// Both loops together take far more than 300 ms of CPU.
		return err == nil && groups[cmd.Process.Pid] >= 300*time.Millisecond
	}, time.Minute, 50*time.Millisecond)
	own, err := scale.OwnCPU()
	require.NoError(t, err)
	require.Positive(t, own)
}
