package agent_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/agent/journal"
	"github.com/mantis-deploy/mantis/internal/config"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// testLogger writes to the test's output, shown when the test fails.
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// execConfig is the agent's exec defaults with a short kill grace, changed by
// change when it is not nil.
func execConfig(change func(*config.Exec)) config.Exec {
	cfg := config.DefaultAgent().Exec
	cfg.KillGrace = config.Duration{Duration: 200 * time.Millisecond}
	cfg.StopTimeout = config.Duration{Duration: 5 * time.Second}
	if change != nil {
		change(&cfg)
	}
	return cfg
}

// newRunner returns a Runner journaling in a directory of the test's own.
func newRunner(t *testing.T, change func(*config.Exec)) *agent.Runner {
	return agent.NewRunner(execConfig(change), openJournal(t, t.TempDir(), nil), testLogger(t))
}

// openJournal opens the journal in dir with the clock now (time.Now when nil).
func openJournal(t *testing.T, dir string, now func() time.Time) *journal.Journal {
	t.Helper()
	j, err := journal.Open(dir, now)
	require.NoError(t, err)
	return j
}

// command returns a well-formed command with a fresh id.
func command(text string) *mantisv1.Command {
	return &mantisv1.Command{Id: uuid.NewString(), Target: "web-1", Mode: config.ModePoll, Command: text}
}

// fifo makes a named pipe. A command that reads it (`cat fifo`) runs until the
// test opens it for writing and closes it again; the open itself returns only
// once the command has opened its end, which tells the test it is running.
func fifo(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "fifo")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	return path
}

// openFIFO opens path for writing, so blocking until its reader is running.
func openFIFO(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// outcome is what a Run returned.
type outcome struct {
	res *mantisv1.CommandResult
	err error
}

// result returns the outcome's result, failing the test on an error.
func (o outcome) result(t *testing.T) *mantisv1.CommandResult {
	t.Helper()
	require.NoError(t, o.err)
	require.NotNil(t, o.res)
	return o.res
}

// runAsync runs cmd in the background and delivers the outcome.
func runAsync(r *agent.Runner, ctx context.Context, cmd *mantisv1.Command) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := r.Run(ctx, cmd)
		ch <- outcome{res, err}
	}()
	return ch
}

// recv returns the next value of ch, failing the test after a while.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(20 * time.Second):
		require.FailNow(t, "nothing arrived in 20s")
		panic("unreachable")
	}
}

// withRequest gives cmd a dispatch request id of its own.
func withRequest(cmd *mantisv1.Command) *mantisv1.Command {
	cmd.DispatchRequestId = uuid.NewString()
	return cmd
}

// redeliver returns cmd as a redelivery of its dispatch request: a new
// command id and a later lease, the same request.
func redeliver(cmd *mantisv1.Command) *mantisv1.Command {
	again := proto.CloneOf(cmd)
	again.Id = uuid.NewString()
	again.LeaseEpoch = cmd.LeaseEpoch + 1
	return again
}

// readFile returns the file's content, "" when it does not exist.
func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ""
	}
	require.NoError(t, err)
	return string(b)
}
