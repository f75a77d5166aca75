package thorax_test

import (
	"context"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/thorax"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// fuzzHeartbeat is the fuzzed Thorax's heartbeat and polling interval.
const fuzzHeartbeat = 20 * time.Millisecond

// fuzzThorax is one running Thorax, registered with a real MandibleService on
// PostgreSQL, serving ThoraxService on loopback; shared by every input of a fuzz
// target. Both links are plaintext: what is fuzzed is the request.
type fuzzThorax struct {
	pool   *pgxpool.Pool
	client mantisv1.ThoraxServiceClient
}

func newFuzzThorax(f *testing.F) fuzzThorax {
	f.Helper()
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	pool := testenv.MigratedPool(f)
	srv := grpc.NewServer()
	mantisv1.RegisterMandibleServiceServer(srv, &grpcapi.MandibleService{DB: pool, Logger: logger, HeartbeatTimeout: time.Hour, ReplicaID: "r1"})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(f, err)
	go func() { _ = srv.Serve(lis) }()
	f.Cleanup(srv.Stop)

	cfg := config.DefaultThorax()
	cfg.Name = "thorax-fuzz"
	cfg.Mandible = config.Endpoint{Address: lis.Addr().String(), TLS: config.TLS{Insecure: true}}
	cfg.Agents.Listen = "127.0.0.1:0"
	cfg.Agents.Insecure = true
	cfg.Polling.Interval.Duration = fuzzHeartbeat
	cfg.Polling.FallbackInterval.Duration = fuzzHeartbeat
	cfg.Heartbeat.Interval.Duration = fuzzHeartbeat
	cfg.Drain.Timeout.Duration = 5 * time.Second
	require.NoError(f, cfg.Validate())
	th, err := thorax.New(cfg, logger)
	require.NoError(f, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- th.Run(ctx) }()
	f.Cleanup(func() {
		cancel()
		<-done
	})
	select {
	case <-th.Ready():
	case err := <-done:
		f.Fatalf("thorax stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		f.Fatal("thorax did not become ready")
	}
	conn, err := grpc.NewClient(th.AgentsAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(f, err)
	f.Cleanup(func() { conn.Close() })
	return fuzzThorax{pool: pool, client: mantisv1.NewThoraxServiceClient(conn)}
}

// targetKnown reports whether Mandible has a target of that name.
func (x fuzzThorax) targetKnown(t *testing.T, name string) bool {
	t.Helper()
	known, err := x.lookupTarget(name)
	require.NoError(t, err)
	return known
}

// lookupTarget is targetKnown for a condition that runs off the test's goroutine: it
// fails nothing itself. A name no target may have (the targets table's CHECK: NUL,
// invalid UTF-8, any character outside the pattern) is not looked up.
func (x fuzzThorax) lookupTarget(name string) (bool, error) {
	if !validTargetName.MatchString(name) {
		return false, nil
	}
	var n int
	err := x.pool.QueryRow(context.Background(), `SELECT count(*) FROM targets WHERE name = $1`, name).Scan(&n)
	return n > 0, err
}

// validTargetName is the targets table's CHECK on names.
var validTargetName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// requireNamedRefusal checks a refusal: never INTERNAL or UNKNOWN, and an
// INVALID_ARGUMENT message that starts with one of fields.
func requireNamedRefusal(t *testing.T, err error, allowed []codes.Code, fields ...string) {
	t.Helper()
	st := status.Convert(err)
	require.Contains(t, allowed, st.Code(), "input answered %s: %s", st.Code(), st.Message())
	if st.Code() != codes.InvalidArgument {
		return
	}
	for _, f := range fields {
		if strings.HasPrefix(st.Message(), f+": ") {
			return
		}
	}
	require.Failf(t, "a refusal names no field", "%s (fields: %v)", st.Message(), fields)
}

// validText makes s valid UTF-8, as every gRPC client must send it.
func validText(s string) string { return strings.ToValidUTF8(s, "\uFFFD") }

// FuzzPollCommands sends any poll: a refusal is INVALID_ARGUMENT naming target,
// max_commands or wait, and does not make the target known to Mandible; an accepted
// poll answers within its wait.
func FuzzPollCommands(f *testing.F) {
	f.Add("web-poll", int32(1), true, int64(0), int32(50_000_000))
	f.Add("", int32(1), false, int64(0), int32(0))
	f.Add("bad target", int32(1), false, int64(0), int32(0))
	f.Add("web-poll", int32(0), false, int64(0), int32(0))
	f.Add("web-poll", int32(101), false, int64(0), int32(0))
	f.Add("web-poll", int32(1), true, int64(-1), int32(0))
	f.Add("web-poll", int32(1), true, int64(1), int32(-1))
	f.Add("web\x00poll", int32(1), true, int64(0), int32(1))
	x := newFuzzThorax(f)
	accepted := map[string]bool{}
	f.Fuzz(func(t *testing.T, target string, max int32, withWait bool, seconds int64, nanos int32) {
		target = validText(target)
		req := &mantisv1.PollCommandsRequest{Target: target, MaxCommands: max}
		if withWait {
			req.Wait = &durationpb.Duration{Seconds: seconds, Nanos: nanos}
		}
		knownBefore := accepted[target] || x.targetKnown(t, target)
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, err := x.client.PollCommands(ctx, req)
		if err == nil || status.Code(err) == codes.DeadlineExceeded {
			accepted[target] = true // a poll that waits longer than the client is accepted
			return
		}
		requireNamedRefusal(t, err, []codes.Code{codes.InvalidArgument}, "target", "max_commands", "wait")
		if !knownBefore {
			require.Never(t, func() bool {
				known, err := x.lookupTarget(target)
				return err == nil && known
			}, 3*fuzzHeartbeat, fuzzHeartbeat/2, "a refused poll made its target known")
			require.False(t, x.targetKnown(t, target), "a refused poll made its target known")
		}
	})
}

// FuzzReportResult sends any result report for a command this Thorax does not hold:
// a refusal names its field, a forward that Mandible refuses says so, and no command
// is written.
func FuzzReportResult(f *testing.F) {
	f.Add("web-poll", true, "", int64(1), true, int32(0), []byte("hi"), "", "")
	f.Add("web-poll", true, "", int64(0), true, int32(1), []byte(nil), "boom", "")
	f.Add("", false, "x", int64(-1), false, int32(0), []byte(nil), "", "")
	f.Add("web-poll", false, "not-a-uuid", int64(1), true, int32(0), []byte{0, 0xff}, "e\x00", "not-a-uuid")
	f.Add("bad target", true, "", int64(1), false, int32(0), []byte(nil), "", uuid.NewString())
	x := newFuzzThorax(f)
	f.Fuzz(func(t *testing.T, target string, freshID bool, commandID string, epoch int64, withResult bool, exit int32,
		output []byte, errText, requestID string) {
		if freshID {
			commandID = uuid.NewString()
		}
		req := &mantisv1.ReportResultRequest{Target: validText(target), CommandId: validText(commandID), LeaseEpoch: epoch,
			DispatchRequestId: validText(requestID)}
		if withResult {
			req.Result = &mantisv1.CommandResult{ExitCode: exit, Output: output, Error: validText(errText)}
		}
		var before int
		require.NoError(t, x.pool.QueryRow(context.Background(), `SELECT count(*) FROM command_queue`).Scan(&before))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := x.client.ReportResult(ctx, req)
		require.Error(t, err, "a result for a command nobody holds was accepted")
		requireNamedRefusal(t, err, []codes.Code{codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition},
			"target", "command_id", "lease_epoch", "result")
		var after int
		require.NoError(t, x.pool.QueryRow(context.Background(), `SELECT count(*) FROM command_queue`).Scan(&after))
		require.Equal(t, before, after)
	})
}
