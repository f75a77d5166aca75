package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// heldThorax is a ThoraxService that hands out the commands the test queues
// and, while held, answers no report: like a frozen Thorax, it keeps the
// agent between finishing a command and having its result acknowledged.
type heldThorax struct {
	mantisv1.UnimplementedThoraxServiceServer
	commands chan *mantisv1.Command
	attempts chan *mantisv1.ReportResultRequest // every report attempt
	accepted chan *mantisv1.ReportResultRequest // the reports it acknowledged
	held     atomic.Bool
	polls    atomic.Int32 // polls in flight
}

func (f *heldThorax) PollCommands(ctx context.Context, req *mantisv1.PollCommandsRequest) (*mantisv1.PollCommandsResponse, error) {
	f.polls.Add(1)
	defer f.polls.Add(-1)
	select {
	case c := <-f.commands:
		return &mantisv1.PollCommandsResponse{Commands: []*mantisv1.Command{c}}, nil
	case <-time.After(req.GetWait().AsDuration()):
		return &mantisv1.PollCommandsResponse{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (f *heldThorax) ReportResult(ctx context.Context, req *mantisv1.ReportResultRequest) (*mantisv1.ReportResultResponse, error) {
	f.attempts <- req
	if f.held.Load() {
		<-ctx.Done() // frozen: the agent's attempt times out or the agent dies
		return nil, status.Error(codes.Unavailable, "frozen")
	}
	f.accepted <- req
	return &mantisv1.ReportResultResponse{}, nil
}

// agentProcess starts the agent binary with config and returns it; it is
// killed when the test ends.
func agentProcess(t *testing.T, bin, config string) (*exec.Cmd, *lockedBuffer) {
	t.Helper()
	logs := &lockedBuffer{}
	cmd := exec.Command(bin, "--config", config)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	cmd.Stdout, cmd.Stderr = logs, logs
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return cmd, logs
}

// recvWithin returns the next value of ch, failing the test after d.
func recvWithin[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		require.FailNow(t, "timed out waiting for "+what)
		panic("unreachable")
	}
}

// An agent process killed (SIGKILL) after its command finished but before
// Thorax acknowledged the result, then started again: the command ran once,
// the result reaches Thorax under the command's id and lease, and a
// redelivery of the request gets the stored result without a second run.
func TestKilledAgentReportsItsJournaledResultOnceRestarted(t *testing.T) {
	t.Parallel()
	bin := testenv.Binary(t, "agent")
	thorax := &heldThorax{
		commands: make(chan *mantisv1.Command, 10),
		attempts: make(chan *mantisv1.ReportResultRequest, 100),
		accepted: make(chan *mantisv1.ReportResultRequest, 10),
	}
	thorax.held.Store(true)
	gs := grpc.NewServer()
	mantisv1.RegisterThoraxServiceServer(gs, thorax)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)

	dir := t.TempDir()
	marker := filepath.Join(dir, "runs")
	config := writeConfig(t, fmt.Sprintf(`
name = "web-1"
mode = "poll"
[thorax]
address = %q
insecure = true
[journal]
dir = %q
`, lis.Addr().String(), filepath.Join(dir, "journal")))

	cmd := &mantisv1.Command{Id: uuid.NewString(), Target: "web-1", Mode: "poll", LeaseEpoch: 7,
		DispatchRequestId: uuid.NewString(), Command: "echo run >> " + marker + "; echo done"}
	thorax.commands <- cmd
	first, logs := agentProcess(t, bin, config)

	attempt := recvWithin(t, thorax.attempts, 30*time.Second, "the first report attempt")
	require.Equal(t, cmd.Id, attempt.CommandId)
	require.NoError(t, first.Process.Kill()) // SIGKILL: no chance to flush anything
	_ = first.Wait()
	require.Equal(t, "run\n", readMarker(t, marker))
	require.Empty(t, thorax.accepted, "nothing was acknowledged before the kill:\n%s", logs)

	// The killed agent's last poll may still be open on the server until it
	// sees the connection close; a command queued now could go to that dead
	// poll and be lost, so wait for it to end first.
	require.Eventually(t, func() bool { return thorax.polls.Load() == 0 }, 30*time.Second, 10*time.Millisecond,
		"the killed agent's poll never ended on the server")
	// Thorax hands the request out again, as a redelivery would.
	redelivery := &mantisv1.Command{Id: uuid.NewString(), Target: "web-1", Mode: "poll", LeaseEpoch: 8,
		DispatchRequestId: cmd.DispatchRequestId, Command: cmd.Command}
	thorax.commands <- redelivery
	thorax.held.Store(false)
	_, logs = agentProcess(t, bin, config)

	got := map[string]*mantisv1.ReportResultRequest{}
	for len(got) < 2 {
		r := recvWithin(t, thorax.accepted, 60*time.Second, "the reports after the restart")
		got[r.CommandId] = r
	}
	for _, c := range []*mantisv1.Command{cmd, redelivery} {
		r := got[c.Id]
		require.NotNil(t, r, "no report for command %s:\n%s", c.Id, logs)
		require.Equal(t, c.LeaseEpoch, r.LeaseEpoch, "reported under the lease it was received with")
		require.Equal(t, cmd.DispatchRequestId, r.DispatchRequestId)
		require.Equal(t, int32(0), r.Result.ExitCode)
		require.Equal(t, "done\n", string(r.Result.Output))
	}
	require.Equal(t, "run\n", readMarker(t, marker), "the request ran exactly once:\n%s", logs)
	require.True(t, strings.Contains(logs.String(), "reporting results journaled before a restart"), "%s", logs)
}

// readMarker returns the marker file's content.
func readMarker(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
