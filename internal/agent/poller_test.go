package agent_test

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/agent/journal"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// fakeThorax is a ThoraxService that hands out the commands the test queues
// and records every poll and every reported result. One fakeThorax can back
// several servers in turn, as a restarted Thorax would.
type fakeThorax struct {
	mantisv1.UnimplementedThoraxServiceServer
	commands chan *mantisv1.Command
	polls    chan poll
	results  chan *mantisv1.ReportResultRequest
	// mark is copied into each poll as it arrives, so a test can tell what
	// happened before a poll from what happened after.
	mark atomic.Int32
	// failReports is how many more report attempts fail, each with the
	// next of reportErrors in turn.
	failReports atomic.Int32
	attempts    atomic.Int32
}

// reportErrors are the transient failures a report may meet on its way.
var reportErrors = []codes.Code{codes.Unavailable, codes.DeadlineExceeded, codes.Internal, codes.Unknown, codes.ResourceExhausted, codes.Aborted}

// poll is one PollCommands call as the fake saw it.
type poll struct {
	req  *mantisv1.PollCommandsRequest
	mark int32
}

func newFakeThorax() *fakeThorax {
	return &fakeThorax{
		commands: make(chan *mantisv1.Command, 100),
		polls:    make(chan poll, 1000),
		results:  make(chan *mantisv1.ReportResultRequest, 100),
	}
}

func (f *fakeThorax) PollCommands(ctx context.Context, req *mantisv1.PollCommandsRequest) (*mantisv1.PollCommandsResponse, error) {
	f.polls <- poll{req: req, mark: f.mark.Load()}
	wait := time.NewTimer(req.GetWait().AsDuration())
	defer wait.Stop()
	select {
	case c := <-f.commands:
		return &mantisv1.PollCommandsResponse{Commands: []*mantisv1.Command{c}}, nil
	case <-wait.C:
		return &mantisv1.PollCommandsResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *fakeThorax) ReportResult(_ context.Context, req *mantisv1.ReportResultRequest) (*mantisv1.ReportResultResponse, error) {
	n := f.attempts.Add(1)
	if f.failReports.Add(-1) >= 0 {
		return nil, status.Error(reportErrors[int(n-1)%len(reportErrors)], "not now")
	}
	f.results <- req
	return &mantisv1.ReportResultResponse{}, nil
}

// serve starts a gRPC server for f on addr with mutual TLS (Thorax's pair,
// agents' certificates from the same CA) and returns it and its address.
func (f *fakeThorax) serve(t *testing.T, certs devcerts.Bundle, addr string) (*grpc.Server, string) {
	t.Helper()
	cert, key := certs.Pair("thorax")
	tc, err := tlsconf.Server(tlsconf.Files{CA: certs.CACert(), Cert: cert, Key: key})
	require.NoError(t, err)
	// WaitForHandlers: once Stop returns, no handler of this server can take
	// a queued command any more.
	gs := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)), grpc.WaitForHandlers(true))
	mantisv1.RegisterThoraxServiceServer(gs, f)
	lis, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return gs, lis.Addr().String()
}

// pollSetup is a poll-mode agent running against a fake Thorax.
type pollSetup struct {
	thorax *fakeThorax
	server *grpc.Server
	addr   string
	certs  devcerts.Bundle
	logs   *syncBuffer
	cancel context.CancelFunc
	done   chan error // receives Run's error when it returns
	once   sync.Once
	err    error
}

// stop stops the agent and returns what Run returned.
func (s *pollSetup) stop(t *testing.T) error {
	t.Helper()
	s.once.Do(func() {
		s.cancel()
		s.err = recv(t, s.done)
	})
	return s.err
}

// syncBuffer is a bytes.Buffer that a logger may write while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func setupPoll(t *testing.T, change func(*config.Agent)) *pollSetup {
	t.Helper()
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	s := &pollSetup{thorax: newFakeThorax(), certs: certs, logs: &syncBuffer{}, done: make(chan error, 1)}
	s.server, s.addr = s.thorax.serve(t, certs, "127.0.0.1:0")

	cfg := config.DefaultAgent()
	cfg.Name = "web-1"
	cfg.Mode = config.ModePoll
	cfg.Exec = execConfig(nil)
	cert, key := certs.Pair("agent")
	cfg.Thorax = config.Endpoint{Address: s.addr, TLS: config.TLS{CACertPath: certs.CACert(), CertPath: cert, KeyPath: key}}
	cfg.Journal.Dir = t.TempDir()
	if change != nil {
		change(&cfg)
	}
	require.NoError(t, cfg.Validate())

	logger := slog.New(slog.NewTextHandler(io.MultiWriter(t.Output(), s.logs), nil))
	p, err := agent.NewPoller(cfg, agent.NewRunner(cfg.Exec, openJournal(t, cfg.Journal.Dir, nil), logger), logger)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- p.Run(ctx) }()
	t.Cleanup(func() { require.NoError(t, s.stop(t)) })
	return s
}

// result waits for the result of the command id.
func (s *pollSetup) result(t *testing.T, id string) *mantisv1.CommandResult {
	t.Helper()
	r := recv(t, s.thorax.results)
	require.Equal(t, id, r.CommandId)
	require.Equal(t, "web-1", r.Target)
	return r.Result
}

func TestPollRunsAndReports(t *testing.T) {
	t.Parallel()
	s := setupPoll(t, nil)

	cmd := command("echo polled; exit 4")
	s.thorax.commands <- cmd
	res := s.result(t, cmd.Id)
	require.Equal(t, int32(4), res.ExitCode)
	require.Equal(t, "polled\n", string(res.Output))

	p := recv(t, s.thorax.polls)
	require.Equal(t, "web-1", p.req.Target)
	require.Equal(t, agent.PollWait, p.req.Wait.AsDuration())
}

func TestPollAsksOnlyForFreeSlots(t *testing.T) {
	t.Parallel()
	s := setupPoll(t, func(c *config.Agent) { c.Exec.MaxConcurrent = 2 })
	pipes := []string{fifo(t), fifo(t)}
	a, b := command("cat "+pipes[0]), command("cat "+pipes[1])

	require.Equal(t, int32(2), recv(t, s.thorax.polls).req.MaxCommands)
	s.thorax.commands <- a
	require.Equal(t, int32(1), recv(t, s.thorax.polls).req.MaxCommands, "a runs: one slot left")
	s.thorax.commands <- b

	// Both slots are taken: the agent must not poll again until one frees.
	s.thorax.mark.Store(1)
	w := openFIFO(t, pipes[0])
	require.NoError(t, w.Close())
	require.Equal(t, int32(0), s.result(t, a.Id).ExitCode)
	next := recv(t, s.thorax.polls)
	require.Equal(t, int32(1), next.mark, "polled while every slot was taken")
	require.Equal(t, int32(1), next.req.MaxCommands, "b still runs")

	require.NoError(t, openFIFO(t, pipes[1]).Close())
	require.Equal(t, int32(0), s.result(t, b.Id).ExitCode)
}

func TestPollReportsMalformedCommands(t *testing.T) {
	t.Parallel()
	s := setupPoll(t, nil)

	cmd := &mantisv1.Command{Id: "not-a-uuid", Target: "web-1", Command: "true"}
	s.thorax.commands <- cmd
	res := s.result(t, cmd.Id)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Contains(t, res.Error, `command.id: must be a UUID, got "not-a-uuid"`)
}

// Thorax stops while a command runs; its result waits for Thorax to come back
// on the same address, and the agent goes on polling the new Thorax.
func TestPollSurvivesThoraxRestart(t *testing.T) {
	t.Parallel()
	s := setupPoll(t, nil)
	pipe := fifo(t)

	running := command("cat " + pipe)
	s.thorax.commands <- running
	w := openFIFO(t, pipe) // running
	s.server.Stop()

	_, err := w.WriteString("finished while thorax was down\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	// The agent retries its poll and its report against nothing for a while.
	require.Eventually(t, func() bool {
		logs := s.logs.String()
		return strings.Contains(logs, "reporting result failed") && strings.Contains(logs, "polling thorax failed")
	}, 20*time.Second, 10*time.Millisecond)

	s.server, _ = s.thorax.serve(t, s.certs, s.addr)
	res := s.result(t, running.Id)
	require.Equal(t, "finished while thorax was down\n", string(res.Output))
	require.Equal(t, int32(0), res.ExitCode)

	after := command("echo after restart")
	s.thorax.commands <- after
	require.Equal(t, "after restart\n", string(s.result(t, after.Id).Output))
	require.Empty(t, s.done, "the agent never gave up")
	require.Contains(t, s.logs.String(), "polling thorax again")
	// Stop the agent before the second server: the cleanups run the other
	// way round, and the agent would spend its stop retrying a lost answer.
	require.NoError(t, s.stop(t))
}

// On stop the agent takes no new work, gives a running command
// exec.stop_timeout, kills it, and still reports its result.
func TestPollStopsGracefully(t *testing.T) {
	t.Parallel()
	s := setupPoll(t, func(c *config.Agent) { c.Exec.StopTimeout.Duration = 300 * time.Millisecond })
	pipe := fifo(t)

	cmd := command("cat " + pipe)
	s.thorax.commands <- cmd
	openFIFO(t, pipe) // running
	s.cancel()

	res := s.result(t, cmd.Id)
	require.True(t, res.Cancelled)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Contains(t, res.Error, "agent stopping")
	require.NoError(t, s.stop(t))
	require.Contains(t, s.logs.String(), "killed commands still running at stop")
}

// Every transient failure is retried until Thorax takes the result, which
// carries the command's lease epoch and dispatch request id; once taken, the
// journal owes it no more, so a restarted agent does not report it again.
func TestPollRetriesAReportUntilAcknowledged(t *testing.T) {
	t.Parallel()
	var journalDir string
	s := setupPoll(t, func(c *config.Agent) { journalDir = c.Journal.Dir })
	s.thorax.failReports.Store(int32(len(reportErrors)))

	cmd := withRequest(command("echo reported"))
	cmd.LeaseEpoch = 42
	s.thorax.commands <- cmd
	r := recv(t, s.thorax.results)
	require.Equal(t, cmd.Id, r.CommandId)
	require.Equal(t, int64(42), r.LeaseEpoch)
	require.Equal(t, cmd.DispatchRequestId, r.DispatchRequestId)
	require.Equal(t, "reported\n", string(r.Result.Output))
	require.Equal(t, int32(len(reportErrors)+1), s.thorax.attempts.Load(), "one attempt per failure, then the one taken")
	require.NoError(t, s.stop(t))

	require.Empty(t, openJournal(t, journalDir, nil).Pending(), "an acknowledged result is not owed any more")
}

// A redelivery (a new command of the same request) joins the run under way:
// one process, and the result is reported under each command's id and lease.
func TestPollRedeliveryJoinsTheRunningRequest(t *testing.T) {
	t.Parallel()
	s := setupPoll(t, nil)
	pipe, marker := fifo(t), filepath.Join(t.TempDir(), "runs")

	first := withRequest(command("echo run >> " + marker + "; cat " + pipe))
	s.thorax.commands <- first
	w := openFIFO(t, pipe) // running
	second := redeliver(first)
	s.thorax.commands <- second
	require.Eventually(t, func() bool { return strings.Contains(s.logs.String(), "request is running already") },
		20*time.Second, 10*time.Millisecond)
	_, err := w.WriteString("shared\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())

	got := map[string]*mantisv1.ReportResultRequest{}
	for range 2 {
		r := recv(t, s.thorax.results)
		got[r.CommandId] = r
	}
	for _, c := range []*mantisv1.Command{first, second} {
		require.Contains(t, got, c.Id)
		require.Equal(t, c.LeaseEpoch, got[c.Id].LeaseEpoch)
		require.Equal(t, "shared\n", string(got[c.Id].Result.Output))
	}
	require.Equal(t, "run\n", readFile(t, marker), "one process for both commands")
}

// An agent that cannot journal refuses the command with a clear error rather
// than running it unrecorded.
func TestPollRefusesWorkWithoutItsJournal(t *testing.T) {
	t.Parallel()
	var journalDir string
	s := setupPoll(t, func(c *config.Agent) { journalDir = c.Journal.Dir })
	require.NoError(t, os.RemoveAll(journalDir))
	require.NoError(t, os.WriteFile(journalDir, nil, 0o600))
	marker := filepath.Join(t.TempDir(), "runs")

	cmd := withRequest(command("echo run >> " + marker))
	s.thorax.commands <- cmd
	res := s.result(t, cmd.Id)
	require.Equal(t, int32(-1), res.ExitCode)
	require.Contains(t, res.Error, "journal unavailable: ")
	require.Empty(t, readFile(t, marker), "not run")
}

// After a restart the agent reports what its journal still owes: the result
// of a run that finished unreported, and the failure of one a restart cut.
func TestPollReportsJournaledResultsAfterRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	finished, cut := withRequest(command("true")), withRequest(command("true"))
	finished.LeaseEpoch, cut.LeaseEpoch = 3, 5
	j := openJournal(t, dir, nil)
	require.NoError(t, j.Begin(finished.DispatchRequestId, finished))
	require.NoError(t, j.Finish(finished.DispatchRequestId, &mantisv1.CommandResult{ExitCode: 9, Output: []byte("before\x00restart")}))
	require.NoError(t, j.Begin(cut.DispatchRequestId, cut))

	s := setupPoll(t, func(c *config.Agent) { c.Journal.Dir = dir })
	got := map[string]*mantisv1.ReportResultRequest{}
	for range 2 {
		r := recv(t, s.thorax.results)
		got[r.CommandId] = r
	}
	require.Equal(t, int64(3), got[finished.Id].LeaseEpoch)
	require.Equal(t, int32(9), got[finished.Id].Result.ExitCode)
	require.Equal(t, []byte("before\x00restart"), got[finished.Id].Result.Output, "output is bytes")
	require.Equal(t, int64(5), got[cut.Id].LeaseEpoch)
	require.Equal(t, journal.RestartedError, got[cut.Id].Result.Error)
	require.Equal(t, cut.DispatchRequestId, got[cut.Id].DispatchRequestId)
}

// Each poll names the commands the agent holds, from their arrival until Thorax
// takes their result, so that Thorax can hand again what an answer lost.
func TestPollNamesTheCommandsItHoldsUntilTheirResultIsTaken(t *testing.T) {
	t.Parallel()
	s := setupPoll(t, func(c *config.Agent) { c.Exec.MaxConcurrent = 2 })
	first := recv(t, s.thorax.polls)
	require.True(t, first.req.NamesHeld)
	require.Empty(t, first.req.HeldCommandIds)
	require.NotEmpty(t, first.req.Session)

	pipe := fifo(t)
	a := command("cat " + pipe)
	s.thorax.commands <- a
	next := recv(t, s.thorax.polls)
	require.True(t, next.req.NamesHeld)
	require.Equal(t, []string{a.Id}, next.req.HeldCommandIds, "a runs")
	require.Equal(t, first.req.Session, next.req.Session, "one session per agent process")

	require.NoError(t, openFIFO(t, pipe).Close())
	require.Equal(t, int32(0), s.result(t, a.Id).ExitCode)
	require.Eventually(t, func() bool {
		noop := command("true")
		s.thorax.commands <- noop
		p := recv(t, s.thorax.polls)
		s.result(t, noop.Id)
		return p.req.NamesHeld && !slices.Contains(p.req.HeldCommandIds, a.Id)
	}, 20*time.Second, 10*time.Millisecond, "a is still named after Thorax took its result")
}
