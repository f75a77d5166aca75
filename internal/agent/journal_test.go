package agent_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/agent/journal"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// journalSetup is a Runner whose journal lives in dir, so a test can open it
// again as a restarted agent would.
type journalSetup struct {
	dir    string
	runner *agent.Runner
	// marker counts the runs of the commands markedCommand makes: each
	// appends a line.
	marker string
}

func setupJournal(t *testing.T) journalSetup {
	t.Helper()
	dir := t.TempDir()
	return journalSetup{
		dir:    dir,
		runner: agent.NewRunner(execConfig(nil), openJournal(t, dir, nil), testLogger(t)),
		marker: filepath.Join(t.TempDir(), "runs"),
	}
}

// markedCommand is a command of a new dispatch request that appends a line
// to the marker, prints out, then runs then.
func (s journalSetup) markedCommand(out, then string) *mantisv1.Command {
	return withRequest(command("echo run >> " + s.marker + "; echo " + out + "; " + then))
}

// runs is how many times the marked commands ran.
func (s journalSetup) runs(t *testing.T) int {
	return strings.Count(readFile(t, s.marker), "run\n")
}

// restart returns a Runner on the same journal, as after an agent restart.
func (s journalSetup) restart(t *testing.T) *agent.Runner {
	return agent.NewRunner(execConfig(nil), openJournal(t, s.dir, nil), testLogger(t))
}

func TestRedeliveryWhileRunningJoinsTheRun(t *testing.T) {
	t.Parallel()
	s := setupJournal(t)
	pipe := fifo(t)

	first := s.markedCommand("once", "cat "+pipe)
	firstDone := runAsync(s.runner, context.Background(), first)
	w := openFIFO(t, pipe) // running

	second := redeliver(first)
	run, err := s.runner.Start(context.Background(), second)
	require.NoError(t, err)
	require.False(t, run.Started(), "a redelivery of a running request starts nothing")
	require.Equal(t, 3, s.runner.Free(), "and takes no slot")

	require.NoError(t, w.Close())
	a := recv(t, firstDone).result(t)
	b, err := run.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, "once\n", string(a.Output))
	require.Equal(t, "once\n", string(b.Output), "the joined delivery gets the run's result")
	require.Equal(t, 1, s.runs(t), "one process for both deliveries")
}

func TestRedeliveryAfterTheRunReturnsTheStoredResult(t *testing.T) {
	t.Parallel()
	s := setupJournal(t)

	cmd := s.markedCommand("stored", "exit 3")
	res, err := s.runner.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.Equal(t, int32(3), res.ExitCode)

	again, err := s.runner.Start(context.Background(), redeliver(cmd))
	require.NoError(t, err)
	require.False(t, again.Started())
	stored, err := again.Wait(context.Background())
	require.NoError(t, err)
	require.Equal(t, int32(3), stored.ExitCode)
	require.Equal(t, "stored\n", string(stored.Output))
	require.Equal(t, res.StartedAt.AsTime(), stored.StartedAt.AsTime())

	// After a restart too, from the journal on disk.
	restarted, err := s.restart(t).Run(context.Background(), redeliver(cmd))
	require.NoError(t, err)
	require.Equal(t, "stored\n", string(restarted.Output))
	require.Equal(t, 1, s.runs(t))

	// A new request (a retry a user asked for) runs again.
	retry := redeliver(cmd)
	retry.DispatchRequestId = withRequest(command("")).DispatchRequestId
	res, err = s.runner.Run(context.Background(), retry)
	require.NoError(t, err)
	require.Equal(t, "stored\n", string(res.Output))
	require.Equal(t, 2, s.runs(t), "a new request id runs")
}

func TestRequestsWithoutARequestIDAreKeyedOnTheCommandID(t *testing.T) {
	t.Parallel()
	s := setupJournal(t)
	cmd := s.markedCommand("legacy", "true")
	cmd.DispatchRequestId = ""

	for range 2 {
		res, err := s.runner.Run(context.Background(), cmd)
		require.NoError(t, err)
		require.Equal(t, "legacy\n", string(res.Output))
	}
	require.Equal(t, 1, s.runs(t), "the same command id runs once")
	_, err := s.runner.Run(context.Background(), redeliver(cmd))
	require.NoError(t, err)
	require.Equal(t, 2, s.runs(t), "without a request id, another command id runs again")
}

func TestJournalNeverHoldsTheEnvironment(t *testing.T) {
	t.Parallel()
	s := setupJournal(t)
	const secret = "s3cr3t-value-7f1c"

	cmd := withRequest(command(`printf %s "${#API_TOKEN}"`))
	cmd.Env = map[string]string{"API_TOKEN": secret}
	res, err := s.runner.Run(context.Background(), cmd)
	require.NoError(t, err)
	require.Equal(t, "17", string(res.Output), "the command saw its env")

	files, err := filepath.Glob(filepath.Join(s.dir, "*"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range files {
		b := readFile(t, f)
		require.NotContains(t, b, secret, f)
		require.NotContains(t, b, "API_TOKEN", f)
		require.NotContains(t, b, "printf", "nor the command's text: %s", f)
	}
}

func TestJournalPrunesEntriesAfterRetention(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var mu sync.Mutex
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		return now
	}
	advance := func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(d)
	}
	j := openJournal(t, dir, clock)
	r := agent.NewRunner(execConfig(nil), j, testLogger(t))
	cmd := withRequest(command("echo kept"))
	_, err := r.Run(context.Background(), cmd)
	require.NoError(t, err)
	_, ok := j.Lookup(cmd.DispatchRequestId)
	require.True(t, ok)

	advance(journal.Retention - time.Minute)
	j.Prune()
	_, ok = j.Lookup(cmd.DispatchRequestId)
	require.True(t, ok, "kept within the retention")
	require.Len(t, entryFiles(t, dir), 1)

	advance(2 * time.Minute)
	j.Prune()
	_, ok = j.Lookup(cmd.DispatchRequestId)
	require.False(t, ok, "pruned past the retention")
	require.Empty(t, entryFiles(t, dir))

	// Reopening prunes too.
	other := withRequest(command("echo old"))
	_, err = r.Run(context.Background(), other)
	require.NoError(t, err)
	advance(journal.Retention)
	_, ok = openJournal(t, dir, clock).Lookup(other.DispatchRequestId)
	require.False(t, ok)
	require.Empty(t, entryFiles(t, dir))
}

// entryFiles lists the journal's entry files.
func entryFiles(t *testing.T, dir string) []string {
	files, err := filepath.Glob(filepath.Join(dir, "*.json"))
	require.NoError(t, err)
	return files
}

func TestUnwritableJournalRefusesNewWork(t *testing.T) {
	t.Parallel()
	s := setupJournal(t)
	done := s.markedCommand("done", "true")
	_, err := s.runner.Run(context.Background(), done)
	require.NoError(t, err)

	// The directory turns into a file: every write fails, even as root.
	require.NoError(t, os.RemoveAll(s.dir))
	require.NoError(t, os.WriteFile(s.dir, nil, 0o600))

	_, err = s.runner.Run(context.Background(), s.markedCommand("never", "true"))
	require.ErrorIs(t, err, journal.ErrUnavailable)
	require.ErrorContains(t, err, "journal unavailable: ")
	require.Equal(t, 1, s.runs(t), "nothing ran without its journal entry")
	require.Equal(t, 4, s.runner.Free(), "the refused command gave its slot back")

	res, err := s.runner.Run(context.Background(), redeliver(done))
	require.NoError(t, err, "a finished request is still answered from memory")
	require.Equal(t, "done\n", string(res.Output))

	_, err = journal.Open(s.dir, nil)
	require.ErrorIs(t, err, journal.ErrUnavailable, "nor does an agent start without it")
}

func TestRunInterruptedByARestartIsNotRunAgain(t *testing.T) {
	t.Parallel()
	s := setupJournal(t)
	cmd := s.markedCommand("first life", "true")

	// What an agent killed between journaling the start and the finish
	// leaves behind.
	j := openJournal(t, t.TempDir(), nil)
	require.NoError(t, j.Begin(cmd.DispatchRequestId, cmd))
	r := agent.NewRunner(execConfig(nil), openJournal(t, j.Dir(), nil), testLogger(t))

	res, err := r.Run(context.Background(), redeliver(cmd))
	require.NoError(t, err)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Equal(t, journal.RestartedError, res.Error)
	require.Equal(t, 0, s.runs(t), "not run again")
}
