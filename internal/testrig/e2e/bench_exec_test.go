package e2e_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/grpcapi"
	"github.com/mantis-deploy/mantis/internal/testrig/scale"
	"github.com/mantis-deploy/mantis/internal/testrig/soak"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// The benchmarks below measure the execution path (`make bench`): Mandible's result
// store against a bare gRPC service on the same TLS, and a command's round trip through
// Mandible, Thorax and a poll-mode agent running as processes. As in
// bench_dispatch_test.go, each b.N iteration is a whole scenario, ns/op is suppressed,
// and the figures are the custom metrics and the logged table.

const (
	// storeCallers and storeCallersMany are the concurrencies of the StoreCommandResult
	// comparison.
	storeCallers     = 16
	storeCallersMany = 256
	// storeRounds rounds alternate the services so that neither gets the quieter half
	// of the run; storeSizes gives the calls of each timed round.
	storeRounds = 2
	// storeOutputBytes is the output each stored result carries.
	storeOutputBytes = 512
	// roundTrips is how many commands the round-trip benchmark runs one after another.
	roundTrips = 50
	// roundTripPoll is how often the round-trip benchmark looks for the stored result.
	roundTripPoll = 5 * time.Millisecond
)

// BenchmarkExecStoreCommandResult compares StoreCommandResult calls per second at 16
// and 256 concurrent callers on one connection, against Mandible's gRPC service over
// mTLS on loopback on a real database, with two baselines on the same TLS: a bare
// service storing each result with a single UPDATE and nothing else (no fencing, events,
// analysis; the goal: batched results beat it by 1.5x at 16 callers, 3x at 256), and a
// bare grpc-go service answering at once (echo, the ceiling of the transport).
func BenchmarkExecStoreCommandResult(b *testing.B) {
	var few, many storeRun
	for range b.N {
		scenario(b, "store-command-result", func(t *testing.T) {
			few.add(runStoreComparison(t, storeCallers))
			many.add(runStoreComparison(t, storeCallersMany))
		})
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(few.store.perSecond(), "store-calls/s")
	b.ReportMetric(few.echo.perSecond(), "echo-calls/s")
	b.ReportMetric(few.bareSQL.perSecond(), "bare-sql-calls/s")
	b.ReportMetric(few.store.perSecond()/few.bareSQL.perSecond(), "ratio-vs-bare-16")
	b.ReportMetric(many.store.perSecond()/many.bareSQL.perSecond(), "ratio-vs-bare-256")
	b.ReportMetric(few.store.perSecond()/few.echo.perSecond(), "ratio")
	table := [][]string{{"mTLS on loopback", "calls", "calls/s", "vs bare UPDATE", "vs echo", "goal", "PostgreSQL cores", "PostgreSQL ms/call",
		"Go ms/call", "busy cores"}}
	for _, r := range []struct {
		callers int
		run     storeRun
		goal    string
	}{{storeCallers, few, ">= 1.5"}, {storeCallersMany, many, ">= 3"}} {
		bare, echo := r.run.bareSQL.perSecond(), r.run.echo.perSecond()
		row := func(name string, x rate, goal string) []string {
			return []string{fmt.Sprintf("%d callers: %s", r.callers, name), strconv.Itoa(x.calls), fmt.Sprintf("%.0f", x.perSecond()),
				fmt.Sprintf("%.3f", x.perSecond()/bare), fmt.Sprintf("%.3f", x.perSecond()/echo), goal,
				fmt.Sprintf("%.2f", x.pgShare()), fmt.Sprintf("%.3f", x.pgPerCall()),
				fmt.Sprintf("%.3f", x.ownPerCall()), fmt.Sprintf("%.2f", x.busyCores())}
		}
		batched := fmt.Sprintf("MandibleService.StoreCommandResult (%.1f a batch)", float64(r.run.results)/float64(max(r.run.batches, 1)))
		table = append(table, row(batched, r.run.store, r.goal),
			row("bare service, one UPDATE per call", r.run.bareSQL, ""), row("bare echo service", r.run.echo, ""))
	}
	logTable(b, table)
}

// storeRun is what runStoreComparison measured at one concurrency.
type storeRun struct {
	store, echo, bareSQL rate
	// batches and results are how many batches the service stored its results in.
	batches, results int64
}

func (r *storeRun) add(o storeRun) {
	r.batches += o.batches
	r.results += o.results
	r.store.add(o.store)
	r.echo.add(o.echo)
	r.bareSQL.add(o.bareSQL)
}

// benchShortVar, set to 1 (`make bench-check`), makes the benchmarks that read it run
// a shorter version of their scenario: fewer calls, the same ratios.
const benchShortVar = "MANTIS_BENCH_SHORT"

// storeSizes returns the calls of each timed round of the store comparison: the store
// and bare services', and the echo service's.
func storeSizes() (storeCalls, echoCalls int) {
	if os.Getenv(benchShortVar) == "1" {
		return 600, 3000
	}
	return 2000, 10000
}

// rate is calls over the time they took, with the CPU the database's sessions of the
// test and the test process (client and server) used meanwhile.
type rate struct {
	calls         int
	elapsed       time.Duration
	pgCPU, ownCPU time.Duration
}

func (r *rate) add(o rate) {
	r.calls += o.calls
	r.elapsed += o.elapsed
	r.pgCPU += o.pgCPU
	r.ownCPU += o.ownCPU
}

// pgShare is the cores the database's sessions kept busy, and pgPerCall their CPU
// per call in milliseconds.
func (r rate) pgShare() float64   { return r.pgCPU.Seconds() / r.elapsed.Seconds() }
func (r rate) pgPerCall() float64 { return ms(r.pgCPU) / float64(r.calls) }

func (r rate) perSecond() float64 { return float64(r.calls) / r.elapsed.Seconds() }

// ownPerCall is the CPU of the benchmark's process (the callers and the service they
// call, both in it) per call in milliseconds, and busyCores what it and the
// database's sessions kept busy together: near the machine's cores, CPU is the limit.
func (r rate) ownPerCall() float64 { return ms(r.ownCPU) / float64(r.calls) }
func (r rate) busyCores() float64  { return (r.pgCPU + r.ownCPU).Seconds() / r.elapsed.Seconds() }

// benchEchoService is the bare baseline: it takes a StoreCommandResultRequest and
// answers at once, or, with a pool, after one UPDATE of the command's row.
type benchEchoService struct{ pool *pgxpool.Pool }

const (
	echoMethod    = "/mantis.bench.v1.Echo/Store"
	bareSQLMethod = "/mantis.bench.v1.BareStore/Store"
)

func (s *benchEchoService) register(srv *grpc.Server, name string) {
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: name,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Store",
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				in := new(mantisv1.StoreCommandResultRequest)
				if err := dec(in); err != nil {
					return nil, err
				}
				if s.pool != nil {
					r := in.GetResult()
					if _, err := s.pool.Exec(ctx, `
						UPDATE command_queue SET status = 'succeeded', exit_code = $2, output = $3, finished_at = now()
						WHERE id = $1 AND status = 'running'`, in.GetCommandId(), r.GetExitCode(), string(r.GetOutput())); err != nil {
						return nil, err
					}
				}
				return &mantisv1.StoreCommandResultResponse{}, nil
			},
		}},
		Metadata: "bench",
	}, struct{}{})
}

// runStoreComparison measures the three services in one process, on one database and
// one TLS configuration, at callers concurrent callers, and returns their rates.
func runStoreComparison(t *testing.T, callers int) storeRun {
	ctx := context.Background()
	pcfg, err := pgxpool.ParseConfig(testenv.MigratedDatabaseURL(t))
	require.NoError(t, err)
	pcfg.MaxConns = int32(config.DefaultMandible().Database.MaxConns) // as a replica runs
	pcfg.AfterConnect = schema.AfterConnect                           // as a replica's connections are
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)

	certs, err := devcerts.Generate(t.TempDir(), []string{"localhost", "127.0.0.1"})
	require.NoError(t, err)
	serveTLS := func(register func(*grpc.Server)) string {
		cert, key := certs.Pair("mandible")
		tc, err := tlsconf.Server(tlsconf.Files{CA: certs.CACert(), Cert: cert, Key: key})
		require.NoError(t, err)
		srv := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)))
		register(srv)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		return lis.Addr().String()
	}
	dial := func(addr string) *grpc.ClientConn {
		cert, key := certs.Pair("thorax")
		tc, err := tlsconf.Client(tlsconf.Files{CA: certs.CACert(), Cert: cert, Key: key}, "")
		require.NoError(t, err)
		conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
		require.NoError(t, err)
		t.Cleanup(func() { conn.Close() })
		return conn
	}
	svc := &grpcapi.MandibleService{DB: pool, Logger: slog.New(slog.DiscardHandler), HeartbeatTimeout: time.Hour}
	mandibleConn := dial(serveTLS(func(s *grpc.Server) { mantisv1.RegisterMandibleServiceServer(s, svc) }))
	echoConn := dial(serveTLS(func(s *grpc.Server) { (&benchEchoService{}).register(s, "mantis.bench.v1.Echo") }))
	bareConn := dial(serveTLS(func(s *grpc.Server) { (&benchEchoService{pool: pool}).register(s, "mantis.bench.v1.BareStore") }))
	mandible := mantisv1.NewMandibleServiceClient(mandibleConn)

	const warmUp = 200
	storeCalls, echoCalls := storeSizes()
	held := holdCommands(t, pool, mandible, storeRounds*storeCalls*2+2*warmUp)
	// Every stored result is of a command of its own.
	var taken atomic.Int64
	next := func() *mantisv1.StoreCommandResultRequest { return held[taken.Add(1)-1] }

	callStore := func(ctx context.Context) error {
		_, err := mandible.StoreCommandResult(ctx, next())
		return err
	}
	callEcho := func(ctx context.Context) error {
		return echoConn.Invoke(ctx, echoMethod, held[0], new(mantisv1.StoreCommandResultResponse))
	}
	callBare := func(ctx context.Context) error {
		return bareConn.Invoke(ctx, bareSQLMethod, next(), new(mantisv1.StoreCommandResultResponse))
	}

	// Warm up connections, TLS sessions, the pool and the query plans.
	timedCalls(t, callers, warmUp, callEcho)
	timedCalls(t, callers, warmUp, callStore)
	timedCalls(t, callers, warmUp, callBare)
	measured := cpuMeter(t, pool)
	var run storeRun
	for range storeRounds {
		run.echo.add(measured(echoCalls, func() { timedCalls(t, callers, echoCalls, callEcho) }))
		run.store.add(measured(storeCalls, func() { timedCalls(t, callers, storeCalls, callStore) }))
		run.bareSQL.add(measured(storeCalls, func() { timedCalls(t, callers, storeCalls, callBare) }))
	}

	var succeeded int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM command_queue WHERE status = 'succeeded'`).Scan(&succeeded))
	require.Equal(t, storeRounds*storeCalls*2+2*warmUp, succeeded, "every call stored its result")
	run.batches, run.results = svc.ResultBatches()
	return run
}

// cpuMeter returns a function that runs calls and measures them: their wall time, the
// CPU of this database's PostgreSQL sessions (read from /proc: the server runs on this
// machine) and of this process. The sessions are those open now, after the warm-up;
// the pool keeps them.
func cpuMeter(t *testing.T, pool *pgxpool.Pool) func(n int, calls func()) rate {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE datname = current_database()`)
	require.NoError(t, err)
	pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	require.NoError(t, err)
	read := func() (pg, own time.Duration) {
		for _, pid := range pids {
			if c, err := soak.ProcessCPU(int(pid)); err == nil { // a session may have closed
				pg += c
			}
		}
		own, err := scale.OwnCPU()
		require.NoError(t, err)
		return pg, own
	}
	return func(n int, calls func()) rate {
		pg0, own0 := read()
		start := time.Now()
		calls()
		elapsed := time.Since(start)
		pg1, own1 := read()
		return rate{calls: n, elapsed: elapsed, pgCPU: pg1 - pg0, ownCPU: own1 - own0}
	}
}

// timedCalls makes n calls from callers goroutines and returns how long they took.
func timedCalls(t *testing.T, callers, n int, call func(context.Context) error) time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var (
		left    atomic.Int64
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	left.Store(int64(n))
	start := time.Now()
	for range callers {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				if err := call(ctx); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	require.NoError(t, first)
	return elapsed
}

// holdCommands makes n commands held by a registered instance, through the same path
// as production (enqueue, claim, deliver, FetchPendingCommands), and returns a result
// to store for each.
func holdCommands(t *testing.T, pool *pgxpool.Pool, mandible mantisv1.MandibleServiceClient, n int) []*mantisv1.StoreCommandResultRequest {
	t.Helper()
	ctx := context.Background()
	reg, err := mandible.RegisterInstance(ctx, &mantisv1.RegisterInstanceRequest{Name: "bench-thorax", Version: "bench"})
	require.NoError(t, err)
	instance := reg.GetInstanceId()
	const target = "bench-target"
	_, err = mandible.Heartbeat(ctx, &mantisv1.HeartbeatRequest{InstanceId: instance, PollTargets: []string{target}})
	require.NoError(t, err)

	// Every command is held at once on the one target: lift its limit of one at a time.
	_, err = schema.SetLimit(ctx, pool, schema.Limit{Name: target, Scope: domain.LimitScopeTarget, Value: target, MaxRunning: schema.MaxLimitRunning}, "bench")
	require.NoError(t, err)

	const chunk = 1000
	prefix := uniqueName("store")
	for start := 0; start < n; start += chunk {
		var reqs []schema.NewDispatchRequest
		for i := start; i < min(start+chunk, n); i++ {
			reqs = append(reqs, schema.NewDispatchRequest{
				IdempotencyKey: fmt.Sprintf("%s-%d", prefix, i), Target: target, Command: "true", Priority: "normal",
			})
		}
		_, err := schema.EnqueueDispatchRequests(ctx, pool, reqs)
		require.NoError(t, err)
		claim, err := schema.ClaimPending(ctx, pool, "bench", len(reqs))
		require.NoError(t, err)
		refs := make([]domain.ClaimRef, len(claim.Claimed))
		for i, c := range claim.Claimed {
			refs[i] = domain.ClaimRef{ID: c.ID, Epoch: c.Epoch}
		}
		out, err := schema.DeliverClaimed(ctx, pool, "bench", refs, schema.DeliverOptions{HeartbeatTimeout: time.Hour})
		require.NoError(t, err)
		require.Len(t, out, len(reqs))
	}

	output := make([]byte, storeOutputBytes)
	for i := range output {
		output[i] = 'a' + byte(i%26)
	}
	var held []*mantisv1.StoreCommandResultRequest
	for len(held) < n {
		resp, err := mandible.FetchPendingCommands(ctx, &mantisv1.FetchPendingCommandsRequest{
			InstanceId: instance, PollTargets: []string{target}, MaxCommands: chunk,
		})
		require.NoError(t, err)
		require.NotEmpty(t, resp.GetCommands(), "fewer commands than enqueued")
		for _, c := range resp.GetCommands() {
			now := timestamppb.Now()
			held = append(held, &mantisv1.StoreCommandResultRequest{
				InstanceId: instance, CommandId: c.GetId(), LeaseEpoch: c.GetLeaseEpoch(),
				Result: &mantisv1.CommandResult{ExitCode: 0, Output: output, StartedAt: now, FinishedAt: now},
			})
		}
	}
	_, err = pool.Exec(ctx, `VACUUM ANALYZE command_queue`)
	require.NoError(t, err)
	return held
}

// BenchmarkExecRoundTrip runs roundTrips commands (`true`) one after another through
// Mandible, Thorax and a poll-mode agent, all processes on mTLS, and reports the round
// trip from enqueue to stored result, split at the command's row being written and
// claimed: Mandible's dispatch, the wait for Thorax's polling tick (200 ms here; no
// broker nudge), and the claim, hand-off, run and store. It also reports the resident
// memory of Thorax and the agent, idle after start-up and after the run.
func BenchmarkExecRoundTrip(b *testing.B) {
	var run roundTripRun
	for range b.N {
		scenario(b, "round-trip", func(t *testing.T) { run.add(runRoundTrips(t)) })
	}
	for _, s := range [][]time.Duration{run.total, run.dispatch, run.claimWait, run.execute} {
		slices.Sort(s)
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(ms(percentile(run.total, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(run.total, 0.99)), "p99-ms")
	b.ReportMetric(ms(percentile(run.execute, 0.50)), "claim-to-stored-p50-ms")
	b.ReportMetric(ms(percentile(run.execute, 0.99)), "claim-to-stored-p99-ms")
	b.ReportMetric(mib(run.thorax.rss), "thorax-rss-MiB")
	b.ReportMetric(mib(run.agent.rss), "agent-rss-MiB")

	table := [][]string{{fmt.Sprintf("round trip of `true`, %d commands one at a time", len(run.total)), "p50 ms", "p99 ms", "max ms"}}
	for _, r := range []struct {
		name    string
		samples []time.Duration
	}{
		{"enqueue -> result stored", run.total},
		{"  enqueue -> command written (Mandible dispatch)", run.dispatch},
		{"  written -> claimed (Thorax polling tick)", run.claimWait},
		{"  claimed -> stored (hand-off, run, store)", run.execute},
	} {
		table = append(table, []string{r.name, fmt.Sprintf("%.1f", ms(percentile(r.samples, 0.50))),
			fmt.Sprintf("%.1f", ms(percentile(r.samples, 0.99))), fmt.Sprintf("%.1f", ms(r.samples[len(r.samples)-1]))})
	}
	// Benchmark logs are cut at ten lines: one line per process.
	for _, p := range []struct {
		name        string
		idle, after memory
	}{{"thorax", run.thoraxIdle, run.thorax}, {"poll agent", run.agentIdle, run.agent}} {
		table = append(table, []string{fmt.Sprintf("%s VmRSS (VmHWM) MiB: idle %.1f (%.1f), after the run %.1f (%.1f)",
			p.name, mib(p.idle.rss), mib(p.idle.peak), mib(p.after.rss), mib(p.after.peak))})
	}
	logTable(b, table)
}

// roundTripRun is what one or more round-trip runs measured.
type roundTripRun struct {
	total, dispatch, claimWait, execute  []time.Duration
	thoraxIdle, thorax, agentIdle, agent memory
}

func (r *roundTripRun) add(o roundTripRun) {
	r.total = append(r.total, o.total...)
	r.dispatch = append(r.dispatch, o.dispatch...)
	r.claimWait = append(r.claimWait, o.claimWait...)
	r.execute = append(r.execute, o.execute...)
	r.thoraxIdle, r.thorax = r.thoraxIdle.max(o.thoraxIdle), r.thorax.max(o.thorax)
	r.agentIdle, r.agent = r.agentIdle.max(o.agentIdle), r.agent.max(o.agent)
}

func runRoundTrips(t *testing.T) roundTripRun {
	c := setupExecCluster(t, 15*time.Second)
	th := c.startThorax(t)
	agent := c.startPollAgent(t, th)
	instance := c.waitRegistered(t, th)
	c.waitPollTarget(t, agent, instance)

	one := func() (total, dispatch, claimWait, execute time.Duration) {
		enqueued := time.Now()
		req := c.enqueue(t, schema.NewDispatchRequest{Target: agent.Name, Command: "true", Timeout: time.Minute})
		var (
			id     uuid.UUID
			status string
			stored time.Time
		)
		deadline := time.Now().Add(commandTimeout)
		tick := time.NewTicker(roundTripPoll)
		defer tick.Stop()
		for {
			cmd, ok, err := c.command(req)
			require.NoError(t, err)
			if ok && (cmd.Status == "succeeded" || cmd.Status == "failed") {
				stored, id, status = time.Now(), cmd.ID, cmd.Status
				break
			}
			require.True(t, time.Now().Before(deadline), "command of request %s not stored after %s", req, commandTimeout)
			<-tick.C
		}
		require.Equal(t, "succeeded", status)
		var written, claimed time.Time
		require.NoError(t, c.pool.QueryRow(c.ctx, `SELECT created_at, claimed_at FROM command_queue WHERE id = $1`, id).Scan(&written, &claimed))
		return stored.Sub(enqueued), written.Sub(enqueued), claimed.Sub(written), stored.Sub(claimed)
	}
	for range 3 { // warm up the dispatcher, Thorax and the agent
		one()
	}
	run := roundTripRun{thoraxIdle: th.memory(t), agentIdle: agent.memory(t)}
	for range roundTrips {
		total, dispatch, claimWait, execute := one()
		run.total = append(run.total, total)
		run.dispatch = append(run.dispatch, dispatch)
		run.claimWait = append(run.claimWait, claimWait)
		run.execute = append(run.execute, execute)
	}
	run.thorax, run.agent = th.memory(t), agent.memory(t)
	return run
}

// memory reads the process's resident set (readMemory reads /proc/<pid>/status).
func (p *mantisProcess) memory(t *testing.T) memory {
	t.Helper()
	return readMemory(t, &replica{ID: p.Name, cmd: p.cmd})
}
