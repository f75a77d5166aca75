package agent_test

import (
	"errors"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// prSetChildSubreaper is PR_SET_CHILD_SUBREAPER from <linux/prctl.h>.
const prSetChildSubreaper = 36

// adoptOrphans makes the test process the reaper of the processes its
// children leave behind. Without it a killed orphan is reparented to PID 1,
// and where PID 1 does not reap (a bare container), it stays a zombie that
// kill(pid, 0) still finds, dead as it is.
func adoptOrphans(t *testing.T) {
	t.Helper()
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
	if errno != 0 {
		require.NoError(t, errno, "prctl(PR_SET_CHILD_SUBREAPER)")
	}
}

// processGone reports whether pid no longer exists, reaping it first if it
// is a dead orphan the test adopted.
func processGone(pid int) bool {
	var ws syscall.WaitStatus
	_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
