package agent_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/config"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

func TestRunReturnsExitCodeAndOutput(t *testing.T) {
	t.Parallel()
	r := newRunner(t, nil)

	before := time.Now()
	res, err := r.Run(context.Background(), command("echo out; echo err >&2; exit 3"))
	require.NoError(t, err)
	require.Equal(t, int32(3), res.ExitCode)
	require.Equal(t, "out\nerr\n", string(res.Output))
	require.False(t, res.OutputTruncated)
	require.False(t, res.TimedOut)
	require.False(t, res.Cancelled)
	require.Empty(t, res.Error)
	require.False(t, res.StartedAt.AsTime().Before(before.Truncate(time.Microsecond)))
	require.False(t, res.FinishedAt.AsTime().Before(res.StartedAt.AsTime()))

	res, err = r.Run(context.Background(), command("true"))
	require.NoError(t, err)
	require.Equal(t, int32(0), res.ExitCode)
	require.Empty(t, res.Output)
}

func TestRunKeepsTheTailOfLongOutput(t *testing.T) {
	t.Parallel()
	r := newRunner(t, func(c *config.Exec) { c.OutputLimitBytes = 10 })

	res, err := r.Run(context.Background(), command("printf 0123456789abcdefghij"))
	require.NoError(t, err)
	require.Equal(t, "abcdefghij", string(res.Output))
	require.True(t, res.OutputTruncated)

	res, err = r.Run(context.Background(), command("printf 0123456789"))
	require.NoError(t, err)
	require.Equal(t, "0123456789", string(res.Output))
	require.False(t, res.OutputTruncated, "exactly the limit is not cut")

	// Many writes of every size, from both streams, well past the limit.
	r = newRunner(t, func(c *config.Exec) { c.OutputLimitBytes = 1000 })
	res, err = r.Run(context.Background(), command(`i=0; while [ $i -lt 3000 ]; do echo "line $i"; echo "err $i" >&2; i=$((i+1)); done; printf END`))
	require.NoError(t, err)
	var want strings.Builder
	for i := range 3000 {
		fmt.Fprintf(&want, "line %d\nerr %d\n", i, i)
	}
	want.WriteString("END")
	require.Equal(t, want.String()[want.Len()-1000:], string(res.Output))
	require.True(t, res.OutputTruncated)
	require.Equal(t, int32(0), res.ExitCode)
}

func TestTimeoutKillsTheWholeProcessGroup(t *testing.T) {
	adoptOrphans(t) // process-wide; harmless to the other tests
	t.Parallel()
	r := newRunner(t, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")

	cmd := command("sleep 300 & echo $! > " + pidFile + "; sleep 300")
	cmd.Timeout = durationpb.New(time.Second)
	res, err := r.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.False(t, res.Cancelled)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Contains(t, res.Error, "timed out after 1s")
	took := res.FinishedAt.AsTime().Sub(res.StartedAt.AsTime())
	require.GreaterOrEqual(t, took, time.Second)
	require.Less(t, took, 5*time.Second)

	pid := readPID(t, pidFile)
	require.Eventually(t, func() bool { return processGone(pid) }, 5*time.Second, 10*time.Millisecond,
		"background child %d of the timed-out command survived", pid)
}

func TestTimeoutKillsProcessesThatIgnoreSIGTERM(t *testing.T) {
	adoptOrphans(t)
	t.Parallel()
	r := newRunner(t, nil) // kill grace 200ms
	pidFile := filepath.Join(t.TempDir(), "pid")

	// Ignored signals are inherited: the background sleep ignores SIGTERM too.
	cmd := command("trap '' TERM; sleep 300 & echo $! > " + pidFile + "; sleep 300")
	cmd.Timeout = durationpb.New(500 * time.Millisecond)
	res, err := r.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, int32(-1), res.ExitCode)

	pid := readPID(t, pidFile)
	require.Eventually(t, func() bool { return processGone(pid) }, 5*time.Second, 10*time.Millisecond)
}

func TestProcessesLeftBehindAreKilled(t *testing.T) {
	adoptOrphans(t)
	t.Parallel()
	r := newRunner(t, nil)
	pidFile := filepath.Join(t.TempDir(), "pid")

	res, err := r.Run(context.Background(), command("sleep 300 & echo $! > "+pidFile+"; echo done"))
	require.NoError(t, err)
	require.Equal(t, int32(0), res.ExitCode)
	require.Equal(t, "done\n", string(res.Output))
	require.False(t, res.TimedOut)
	require.Less(t, res.FinishedAt.AsTime().Sub(res.StartedAt.AsTime()), 5*time.Second)

	pid := readPID(t, pidFile)
	require.Eventually(t, func() bool { return processGone(pid) }, 5*time.Second, 10*time.Millisecond)
}

// SIGTERM comes first, so commands and what they leave behind can clean up,
// even when they no longer hold the output pipe.
func TestProcessGroupsGetSIGTERMBeforeSIGKILL(t *testing.T) {
	t.Parallel()
	r := newRunner(t, func(c *config.Exec) { c.KillGrace.Duration = time.Second })
	dir := t.TempDir()
	up, bye := filepath.Join(dir, "up"), filepath.Join(dir, "bye")

	res, err := r.Run(context.Background(), command(`
( trap 'echo bye > `+bye+`; exit 0' TERM; echo up > `+up+`; sleep 300 & wait ) >/dev/null 2>&1 &
while [ ! -s `+up+` ]; do sleep 0.01; done
echo done`))
	require.NoError(t, err)
	require.Equal(t, "done\n", string(res.Output))
	b, err := os.ReadFile(bye)
	require.NoError(t, err, "the leftover process got SIGTERM, not straight SIGKILL")
	require.Equal(t, "bye\n", string(b))

	cmd := command(`trap 'echo cleaning up; exit 7' TERM; sleep 300 & wait`)
	cmd.Timeout = durationpb.New(time.Second)
	res, err = r.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Equal(t, "cleaning up\n", string(res.Output))
}

func TestDefaultTimeoutAppliesWithoutOne(t *testing.T) {
	t.Parallel()
	r := newRunner(t, func(c *config.Exec) { c.DefaultTimeout.Duration = 300 * time.Millisecond })

	res, err := r.Run(context.Background(), command("sleep 300"))
	require.NoError(t, err)
	require.True(t, res.TimedOut)
	require.Contains(t, res.Error, "timed out after 300ms")
}

func TestCancelKillsTheCommand(t *testing.T) {
	adoptOrphans(t)
	t.Parallel()
	r := newRunner(t, nil)
	pidFile, pipe := filepath.Join(t.TempDir(), "pid"), fifo(t)
	require.False(t, r.Cancel("no-such-command"))

	cmd := command("sleep 300 & echo $! > " + pidFile + "; cat " + pipe)
	results := runAsync(r, context.Background(), cmd)
	openFIFO(t, pipe) // running, the pid file written
	require.True(t, r.Cancel(cmd.Id))

	res := recv(t, results).result(t)
	require.True(t, res.Cancelled)
	require.False(t, res.TimedOut)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Empty(t, res.Error, "a cancel asked for is no error")
	require.False(t, r.Cancel(cmd.Id), "no longer running")

	pid := readPID(t, pidFile)
	require.Eventually(t, func() bool { return processGone(pid) }, 5*time.Second, 10*time.Millisecond)
}

func TestCancellingTheContextKillsTheCommand(t *testing.T) {
	t.Parallel()
	r := newRunner(t, nil)
	pipe := fifo(t)

	ctx, cancel := context.WithCancel(context.Background())
	results := runAsync(r, ctx, command("cat "+pipe))
	openFIFO(t, pipe) // running now
	cancel()

	res := recv(t, results).result(t)
	require.True(t, res.Cancelled)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Contains(t, res.Error, "context canceled")
}

func TestConcurrentRunsAreLimited(t *testing.T) {
	t.Parallel()
	r := newRunner(t, func(c *config.Exec) { c.MaxConcurrent = 2 })
	require.Equal(t, 2, r.Free())

	pipes := []string{fifo(t), fifo(t)}
	first := runAsync(r, context.Background(), command("cat "+pipes[0]))
	second := runAsync(r, context.Background(), command("cat "+pipes[1]))
	writers := []*os.File{openFIFO(t, pipes[0]), openFIFO(t, pipes[1])} // both running

	require.Equal(t, 0, r.Free())
	_, err := r.Run(context.Background(), command("true"))
	require.ErrorIs(t, err, agent.ErrBusy)

	_, err = writers[0].WriteString("first\n")
	require.NoError(t, err)
	require.NoError(t, writers[0].Close())
	require.Equal(t, "first\n", string(recv(t, first).result(t).Output))

	res, err := r.Run(context.Background(), command("echo again"))
	require.NoError(t, err, "a slot is free again")
	require.Equal(t, "again\n", string(res.Output))

	require.NoError(t, writers[1].Close())
	recv(t, second).result(t)
	require.Equal(t, 2, r.Free())
}

func TestEnvironmentAndWorkingDirectory(t *testing.T) {
	t.Parallel()
	agentDir, commandDir := t.TempDir(), t.TempDir()
	r := newRunner(t, func(c *config.Exec) { c.WorkingDir = agentDir })
	const script = `printf '%s|%s|%s|%s' "$GREETING" "$HOME" "${PATH:+inherited}" "$(pwd -P)"`

	cmd := command(script)
	cmd.Env = map[string]string{"GREETING": "hello world", "HOME": "/nowhere"}
	cmd.WorkingDir = commandDir
	res, err := r.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.Equal(t, "hello world|/nowhere|inherited|"+realPath(t, commandDir), string(res.Output))

	res, err = r.Run(context.Background(), command(script))
	require.NoError(t, err)
	require.Equal(t, "|"+os.Getenv("HOME")+"|inherited|"+realPath(t, agentDir), string(res.Output),
		"no extra environment; the agent's default directory")
}

func TestRunThatCannotStart(t *testing.T) {
	t.Parallel()

	r := newRunner(t, func(c *config.Exec) { c.Shell = "/nonexistent/shell" })
	res, err := r.Run(context.Background(), command("true"))
	require.NoError(t, err, "a run that fails to start still has a result")
	require.Equal(t, int32(-1), res.ExitCode)
	require.Contains(t, res.Error, "starting /nonexistent/shell")
	require.NotNil(t, res.StartedAt)
	require.NotNil(t, res.FinishedAt)

	cmd := command("true")
	cmd.WorkingDir = filepath.Join(t.TempDir(), "missing")
	res, err = newRunner(t, nil).Run(context.Background(), cmd)
	require.NoError(t, err)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Contains(t, res.Error, "working directory "+cmd.WorkingDir)
}

func TestSignalFromOutsideIsReported(t *testing.T) {
	t.Parallel()
	r := newRunner(t, nil)

	res, err := r.Run(context.Background(), command("kill -KILL $$"))
	require.NoError(t, err)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Equal(t, "terminated by signal: killed", res.Error)
	require.False(t, res.TimedOut)
	require.False(t, res.Cancelled)
}

func TestMalformedCommandsAreRefused(t *testing.T) {
	t.Parallel()
	r := newRunner(t, nil)

	cases := []struct {
		change func(*mantisv1.Command)
		want   string
	}{
		{func(c *mantisv1.Command) { c.Id = "" }, "command.id: required"},
		{func(c *mantisv1.Command) { c.Id = "42" }, `command.id: must be a UUID, got "42"`},
		{func(c *mantisv1.Command) { c.Command = "  " }, "command.command: required"},
		{func(c *mantisv1.Command) { c.Command = "a\x00b" }, "command.command: must not contain NUL bytes"},
		{func(c *mantisv1.Command) { c.Timeout = durationpb.New(-time.Second) }, "command.timeout: must be positive when set, got -1s"},
		{func(c *mantisv1.Command) { c.Env = map[string]string{"A=B": "c"} }, `command.env: name "A=B" must not contain '=' or NUL`},
		{func(c *mantisv1.Command) { c.Env = map[string]string{"": "c"} }, "command.env: names must not be empty"},
		{func(c *mantisv1.Command) { c.WorkingDir = "relative/dir" }, `command.working_dir: must be an absolute path, got "relative/dir"`},
	}
	for _, tc := range cases {
		cmd := command("true")
		tc.change(cmd)
		_, err := r.Run(context.Background(), cmd)
		var invalid *agent.InvalidCommandError
		require.ErrorAs(t, err, &invalid, tc.want)
		require.Equal(t, []string{tc.want}, invalid.Problems)
	}

	_, err := r.Run(context.Background(), nil)
	require.EqualError(t, err, "invalid command: command: required")

	err = agent.ValidateCommand(&mantisv1.Command{Id: "x", Command: ""})
	require.EqualError(t, err, `invalid command: command.id: must be a UUID, got "x"; command.command: required`)
	require.Equal(t, 4, r.Free(), "refused commands take no slot")
}

func TestShutdownWaitsThenKills(t *testing.T) {
	t.Parallel()
	r := newRunner(t, nil)
	pipes := []string{fifo(t), fifo(t)}

	first := runAsync(r, context.Background(), command("cat "+pipes[0]))
	second := runAsync(r, context.Background(), command("cat "+pipes[1]))
	quick := openFIFO(t, pipes[0])
	openFIFO(t, pipes[1]) // both running

	ctx, cancel := context.WithCancel(context.Background())
	killed := make(chan int, 1)
	go func() { killed <- r.Shutdown(ctx) }()
	// Once stopping, nothing new starts.
	require.Eventually(t, func() bool {
		_, err := r.Run(context.Background(), command("true"))
		return errors.Is(err, agent.ErrStopping)
	}, 5*time.Second, 10*time.Millisecond)

	// One finishes within the bound, untouched.
	require.NoError(t, quick.Close())
	res := recv(t, first).result(t)
	require.False(t, res.Cancelled)
	require.Equal(t, int32(0), res.ExitCode)

	// The bound passes: the other is killed.
	cancel()
	require.Equal(t, 1, recv(t, killed))
	res = recv(t, second).result(t)
	require.True(t, res.Cancelled)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Contains(t, res.Error, "agent stopping")
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	require.Positive(t, pid)
	return pid
}

func realPath(t *testing.T, dir string) string {
	t.Helper()
	p, err := filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	return p
}
