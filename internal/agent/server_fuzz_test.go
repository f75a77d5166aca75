package agent_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/agent/journal"
	"github.com/mantis-deploy/mantis/internal/config"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// fuzzAgent is one listen-mode AgentService on a loopback listener, shared by every
// input of a fuzz target. Its shell is /bin/true, so that no fuzzed command text runs
// anything on this host; everything else is the agent's own.
type fuzzAgent struct {
	client     mantisv1.AgentServiceClient
	journalDir string
}

func newFuzzAgent(f *testing.F) fuzzAgent {
	f.Helper()
	cfg := config.DefaultAgent().Exec
	cfg.Shell = "/bin/true"
	cfg.KillGrace = config.Duration{Duration: 100 * time.Millisecond}
	cfg.StopTimeout = config.Duration{Duration: 5 * time.Second}
	dir := f.TempDir()
	runs, err := journal.Open(dir, nil)
	require.NoError(f, err)
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	listen := config.DefaultAgent().Listen
	listen.Insecure = true
	creds, err := agent.ListenCredentials(listen)
	require.NoError(f, err)
	gs := agent.NewGRPCServer(agent.NewServer("web-1", agent.NewRunner(cfg, runs, logger), logger), creds)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(f, err)
	go func() { _ = gs.Serve(lis) }()
	f.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(f, err)
	f.Cleanup(func() { conn.Close() })
	return fuzzAgent{client: mantisv1.NewAgentServiceClient(conn), journalDir: dir}
}

// journal lists the journal directory's files with their sizes: a refused command
// must leave it as it was.
func (a fuzzAgent) journal(t *testing.T) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	entries, err := os.ReadDir(a.journalDir)
	require.NoError(t, err)
	for _, e := range entries {
		info, err := e.Info()
		require.NoError(t, err)
		out[e.Name()] = info.Size()
	}
	return out
}

// validText makes s valid UTF-8, as every gRPC client must send it.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// FuzzRunCommand sends any command to RunCommand: a refusal is INVALID_ARGUMENT with
// every problem naming its command.<field>, and journals nothing; an accepted command
// answers with a result.
func FuzzRunCommand(f *testing.F) {
	f.Add(true, "", "", "echo hi", true, int64(30), int32(0), "K", "v", "/")
	f.Add(false, "not-a-uuid", "x", "", false, int64(0), int32(0), "", "", "relative")
	f.Add(true, "", uuid.NewString(), "a\x00b", true, int64(-1), int32(0), "A=B", "v", "/tmp")
	f.Add(true, "", "", "true", true, int64(0), int32(1), "K", "v\x00", "/nonexistent-dir")
	f.Add(true, "", "", "  ", true, int64(315576000001), int32(-5), "", "", "/\x00")
	a := newFuzzAgent(f)
	f.Fuzz(func(t *testing.T, freshID bool, id, requestID, text string, withTimeout bool, seconds int64, nanos int32,
		envKey, envValue, workingDir string) {
		if freshID {
			id = uuid.NewString()
		}
		cmd := &mantisv1.Command{Id: validText(id), DispatchRequestId: validText(requestID), Target: "web-1", Mode: config.ModeListen,
			Command: validText(text), WorkingDir: validText(workingDir)}
		if withTimeout {
			cmd.Timeout = &durationpb.Duration{Seconds: seconds, Nanos: nanos}
		}
		if envKey != "" || envValue != "" {
			cmd.Env = map[string]string{validText(envKey): validText(envValue)}
		}
		before := a.journal(t)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		resp, err := a.client.RunCommand(ctx, &mantisv1.RunCommandRequest{Command: cmd})
		if err != nil {
			st := status.Convert(err)
			require.Equal(t, codes.InvalidArgument, st.Code(), "input answered %s: %s", st.Code(), st.Message())
			problems := strings.Split(strings.TrimPrefix(st.Message(), "invalid command: "), "; ")
			for _, p := range problems {
				require.True(t, strings.HasPrefix(p, "command."), "a problem naming no field: %q", p)
			}
			require.Equal(t, before, a.journal(t), "a refused command was journaled")
			return
		}
		require.NoError(t, agent.ValidateCommand(cmd), "an invalid command ran")
		require.NotNil(t, resp.GetResult())
	})
}

// FuzzCancelCommand sends any command id to CancelCommand: nothing runs, so an id is
// refused as required or answered NOT_FOUND.
func FuzzCancelCommand(f *testing.F) {
	for _, s := range []string{"", uuid.NewString(), "x", "\x00"} {
		f.Add(s)
	}
	a := newFuzzAgent(f)
	f.Fuzz(func(t *testing.T, id string) {
		_, err := a.client.CancelCommand(context.Background(), &mantisv1.CancelCommandRequest{CommandId: validText(id)})
		st := status.Convert(err)
		if id == "" {
			require.Equal(t, codes.InvalidArgument, st.Code())
			require.True(t, strings.HasPrefix(st.Message(), "command_id: "), st.Message())
			return
		}
		require.Equal(t, codes.NotFound, st.Code(), "%s: %s", st.Code(), st.Message())
	})
}
