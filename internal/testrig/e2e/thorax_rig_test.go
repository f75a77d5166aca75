package e2e_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/broker"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
	"github.com/mantis-deploy/mantis/internal/thorax"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
	"github.com/mantis-deploy/mantis/schema"
)

// brokerWait bounds the waits of the Thorax tests for something that should
// happen.
const brokerWait = 60 * time.Second

// brokerRig is a real Mandible (an OS process) with its database, a broker
// vhost, a listen-mode agent, and what an in-process Thorax needs to work
// against them: a recording proxy in front of Mandible's gRPC service and a
// broker user of its own, whose permissions the test grants and revokes.
type brokerRig struct {
	ctx       context.Context
	pool      *pgxpool.Pool
	b         testenv.Broker
	admin     *amqp.Channel // the test's own channel, as the broker's administrator
	mandible  *replica
	proxy     *recordingMandible
	agent     *recordingAgent
	user      string // Thorax's broker user
	password  string
	placement uuid.UUID // a live instance targets are assigned to before a Thorax takes them
}

// setupBrokerRig starts Mandible. With mandibleBroker it runs with [queue]
// enabled (it declares the topology and publishes a nudge per command);
// without, the test declares the same topology and publishes the nudges it
// needs itself.
func setupBrokerRig(t *testing.T, mandibleBroker bool) *brokerRig {
	t.Helper()
	ctx := context.Background()
	r := &brokerRig{ctx: ctx, b: testenv.RabbitMQ(t), placement: uuid.New()}
	dbURL := testenv.MigratedDatabaseURL(t)
	pool, err := pgxpool.New(ctx, dbURL)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	// The rig puts many requests on one target to see the broker's order and retry
	// steps, not the per-target concurrency default (one running command).
	_, err = schema.SetLimit(ctx, pool, schema.Limit{Name: domain.DefaultTargetLimit, Scope: domain.LimitScopeTarget,
		MaxRunning: schema.MaxLimitRunning}, "test")
	require.NoError(t, err)
	r.pool = pool
	_, err = pool.Exec(ctx, `INSERT INTO thorax_instances (id, name) VALUES ($1, 'placement')`, r.placement)
	require.NoError(t, err)

	grpcPort, err := devstack.FreePort(false)
	require.NoError(t, err)
	opts := replicaOptions{
		ID: uniqueName("thorax-rig"), DatabaseURL: dbURL, Temporal: testenv.TemporalServer(t), PollInterval: "1s",
		Env: []string{fmt.Sprintf("MANTIS_GRPC_LISTEN=127.0.0.1:%d", grpcPort)},
	}
	if mandibleBroker {
		opts.Broker = &r.b
	}
	r.mandible = startReplica(t, opts)
	r.proxy = startRecordingMandible(t, fmt.Sprintf("127.0.0.1:%d", grpcPort))
	r.agent = startRecordingAgent(t)

	conn, err := amqp.DialConfig(r.b.URL(), amqp.Config{TLSClientConfig: r.b.TLSConfig(t)})
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	r.admin, err = conn.Channel()
	require.NoError(t, err)
	if !mandibleBroker {
		require.NoError(t, broker.Declare(r.admin, broker.MantisTopology()))
	}
	require.NoError(t, r.admin.Confirm(false))

	var pw [12]byte
	_, _ = rand.Read(pw[:])
	r.user, r.password = uniqueName("thorax"), hex.EncodeToString(pw[:])
	r.management(t, http.MethodPut, "/users/"+url.PathEscape(r.user), map[string]string{"password": r.password, "tags": ""})
	t.Cleanup(func() {
		_, _ = r.b.Management(context.Background(), http.MethodDelete, "/users/"+url.PathEscape(r.user), nil)
	})
	return r
}

func (r *brokerRig) management(t *testing.T, method, path string, body any) []byte {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		raw, err = json.Marshal(body)
		require.NoError(t, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	out, err := r.b.Management(ctx, method, path, raw)
	require.NoError(t, err)
	return out
}

// grant gives Thorax's user the development stack's ThoraxPermissions: read on
// the command queues only, so that it could not declare or publish anything even
// if it tried.
func (r *brokerRig) grant(t *testing.T) {
	t.Helper()
	r.management(t, http.MethodPut, "/permissions/"+url.PathEscape(r.b.VHost)+"/"+url.PathEscape(r.user), devstack.ThoraxPermissions)
}

// cutOff takes the broker away from Thorax, as an outage would: its user
// loses its permissions on the vhost (so it cannot reconnect) and the broker
// closes its open connections.
func (r *brokerRig) cutOff(t *testing.T) {
	t.Helper()
	r.management(t, http.MethodDelete, "/permissions/"+url.PathEscape(r.b.VHost)+"/"+url.PathEscape(r.user), nil)
	var names []string
	require.Eventually(t, func() bool {
		var conns []struct {
			Name string `json:"name"`
			User string `json:"user"`
		}
		require.NoError(t, json.Unmarshal(r.management(t, http.MethodGet, "/vhosts/"+url.PathEscape(r.b.VHost)+"/connections", nil), &conns))
		names = nil
		for _, c := range conns {
			if c.User == r.user {
				names = append(names, c.Name)
			}
		}
		return len(names) > 0
	}, brokerWait, 200*time.Millisecond, "the management API never listed Thorax's connection")
	for _, n := range names {
		r.management(t, http.MethodDelete, "/connections/"+url.PathEscape(n), nil)
	}
}

// consumerTags returns the consumer tags on the vhost's command queues, by
// queue (Mandible's analysis consumer is not one of them).
func (r *brokerRig) consumerTags(t *testing.T) map[string]string {
	t.Helper()
	var consumers []struct {
		Tag   string `json:"consumer_tag"`
		Queue struct {
			Name string `json:"name"`
		} `json:"queue"`
	}
	require.NoError(t, json.Unmarshal(r.management(t, http.MethodGet, "/consumers/"+url.PathEscape(r.b.VHost), nil), &consumers))
	out := map[string]string{}
	for _, c := range consumers {
		if slices.Contains([]string{broker.HighQueue, broker.NormalQueue, broker.LowQueue}, c.Queue.Name) {
			out[c.Queue.Name] = c.Tag
		}
	}
	return out
}

// depth returns how many messages a queue holds ready.
func (r *brokerRig) depth(t *testing.T, queue string) int {
	t.Helper()
	q, err := r.admin.QueueDeclarePassive(queue, true, false, false, false, nil)
	require.NoError(t, err)
	return q.Messages
}

// publish sends a body to the command queue of priority as Mandible does:
// persistent, confirmed, through mantis.commands.
func (r *brokerRig) publish(t *testing.T, priority string, headers amqp.Table, body []byte) {
	t.Helper()
	dc, err := r.admin.PublishWithDeferredConfirmWithContext(r.ctx, broker.CommandsExchange, broker.CommandRoutingKey("listen", priority), true, false,
		amqp.Publishing{ContentType: "application/json", DeliveryMode: amqp.Persistent, Headers: headers, Body: body})
	require.NoError(t, err)
	ok, err := dc.WaitContext(r.ctx)
	require.NoError(t, err)
	require.True(t, ok)
}

// nudge publishes the nudge of a command.
func (r *brokerRig) nudge(t *testing.T, commandID uuid.UUID, priority string, maxRetries int) {
	t.Helper()
	body, err := json.Marshal(broker.Nudge{CommandID: commandID.String(), Target: "listen-1", Mode: "listen", Priority: priority, MaxRetries: maxRetries})
	require.NoError(t, err)
	r.publish(t, priority, nil, body)
}

// addTarget registers a listen-mode target served by the rig's agent,
// assigned to instance.
func (r *brokerRig) addTarget(t *testing.T, name string, instance uuid.UUID) {
	t.Helper()
	_, err := r.pool.Exec(r.ctx, `INSERT INTO targets (name, mode, address, assigned_instance_id) VALUES ($1, 'listen', $2, $3)`,
		name, r.agent.addr, instance)
	require.NoError(t, err)
}

func (r *brokerRig) assign(t *testing.T, target, instance string) {
	t.Helper()
	_, err := r.pool.Exec(r.ctx, `UPDATE targets SET assigned_instance_id = $2 WHERE name = $1`, target, instance)
	require.NoError(t, err)
}

// enqueue asks Mandible to dispatch one command per priority to target and
// returns their command ids, in order, once Mandible wrote them.
func (r *brokerRig) enqueue(t *testing.T, target, command string, priorities ...string) []uuid.UUID {
	t.Helper()
	reqs := make([]schema.NewDispatchRequest, len(priorities))
	for i, p := range priorities {
		reqs[i] = schema.NewDispatchRequest{IdempotencyKey: uniqueName("req"), Target: target, Command: command, Priority: p}
	}
	enqueued, err := schema.EnqueueDispatchRequests(r.ctx, r.pool, reqs)
	require.NoError(t, err)
	ids := make([]uuid.UUID, len(enqueued))
	require.Eventually(t, func() bool {
		for i, e := range enqueued {
			if ids[i] != uuid.Nil {
				continue
			}
			err := r.pool.QueryRow(r.ctx, `SELECT id FROM command_queue WHERE dispatch_request_id = $1`, e.ID).Scan(&ids[i])
			if err != nil {
				return false
			}
		}
		return true
	}, brokerWait, 50*time.Millisecond, "Mandible did not dispatch the requests")
	return ids
}

// brokerCommandState is a command's row as the tests check it.
type brokerCommandState struct {
	status     string
	leaseEpoch int64
	holder     *uuid.UUID
}

func (r *brokerRig) command(t *testing.T, id uuid.UUID) brokerCommandState {
	t.Helper()
	var s brokerCommandState
	require.NoError(t, r.pool.QueryRow(r.ctx, `SELECT status, lease_epoch, holder_instance_id FROM command_queue WHERE id = $1`, id).
		Scan(&s.status, &s.leaseEpoch, &s.holder))
	return s
}

// waitSucceeded waits until every command has a stored successful result.
func (r *brokerRig) waitSucceeded(t *testing.T, ids ...uuid.UUID) {
	t.Helper()
	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, r.pool.QueryRow(r.ctx, `SELECT count(*) FROM command_queue WHERE id = ANY($1) AND status = 'succeeded'`, ids).Scan(&n))
		return n == len(ids)
	}, brokerWait, 50*time.Millisecond, "not every command succeeded")
}

// adminQueue is the [queue] section of the test's own broker user, the
// administrator.
func (r *brokerRig) adminQueue() config.Queue {
	return config.Queue{
		Enabled: true, Host: r.b.Host, Port: r.b.Port, Username: r.b.User, Password: r.b.Password, VHost: r.b.VHost,
		CACertPath: r.b.CACert, ClientCertPath: r.b.ClientCert, ClientKeyPath: r.b.ClientKey,
	}
}

// inProcessThorax is an in-process Thorax instance and its log.
type inProcessThorax struct {
	*thorax.Thorax
	logs *recordingLogs
}

// thoraxConfig is a Thorax on the rig: Mandible through the proxy, the
// listen agent in plaintext, the broker as its own user, and a polling tick
// of an hour so that only what a test wants claims commands.
func (r *brokerRig) thoraxConfig() config.Thorax {
	cfg := config.DefaultThorax()
	cfg.Name = "thorax-e2e"
	cfg.Mandible = config.Endpoint{Address: r.proxy.addr, TLS: config.TLS{Insecure: true}}
	cfg.Agents.Listen = "127.0.0.1:0"
	cfg.Agents.Insecure = true
	cfg.Queue = config.ThoraxQueue{PrefetchCount: 10, Queue: config.Queue{
		Enabled: true, Host: r.b.Host, Port: r.b.Port, Username: r.user, Password: r.password, VHost: r.b.VHost,
		CACertPath: r.b.CACert, ClientCertPath: r.b.ClientCert, ClientKeyPath: r.b.ClientKey,
	}}
	cfg.Polling.Interval.Duration = time.Hour
	cfg.Polling.FallbackInterval.Duration = time.Hour
	cfg.Heartbeat.Interval.Duration = time.Second
	cfg.Drain.Timeout.Duration = 10 * time.Second
	return cfg
}

// startThorax runs a Thorax until the test ends and waits until it is ready
// and its first polling fetch is done (so that what it claims afterwards is
// what the test wants it to).
func (r *brokerRig) startThorax(t *testing.T, cfg config.Thorax) *inProcessThorax {
	t.Helper()
	th, _ := r.startDrainableThorax(t, cfg)
	return th
}

// recordingMandible is a MandibleService in front of a real Mandible: it forwards
// every call and records it, so that a test sees which claims a nudge made
// and which the polling tick made.
type recordingMandible struct {
	mantisv1.UnimplementedMandibleServiceServer
	next mantisv1.MandibleServiceClient
	addr string
	// failNudgeClaims makes every claim that names commands (a nudge's)
	// answer UNAVAILABLE, as an unreachable Mandible would.
	failNudgeClaims atomic.Bool

	mu    sync.Mutex
	calls []recordedCall
}

type recordedCall struct {
	method    string
	req, resp proto.Message
	code      codes.Code
}

func startRecordingMandible(t *testing.T, mandibleAddr string) *recordingMandible {
	t.Helper()
	conn, err := grpc.NewClient(mandibleAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	p := &recordingMandible{next: mantisv1.NewMandibleServiceClient(conn)}
	server := grpc.NewServer()
	mantisv1.RegisterMandibleServiceServer(server, p)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.addr = ln.Addr().String()
	go func() { _ = server.Serve(ln) }()
	t.Cleanup(server.Stop)
	return p
}

func forwardRecorded[Req, Resp proto.Message](p *recordingMandible, method string, ctx context.Context, req Req,
	call func(context.Context, Req, ...grpc.CallOption) (Resp, error)) (Resp, error) {
	resp, err := call(ctx, req)
	p.mu.Lock()
	defer p.mu.Unlock()
	c := recordedCall{method: method, req: proto.Clone(req), code: status.Code(err)}
	if err == nil {
		c.resp = proto.Clone(resp)
	}
	p.calls = append(p.calls, c)
	return resp, err
}

func (p *recordingMandible) RegisterInstance(ctx context.Context, req *mantisv1.RegisterInstanceRequest) (*mantisv1.RegisterInstanceResponse, error) {
	return forwardRecorded(p, "RegisterInstance", ctx, req, p.next.RegisterInstance)
}

func (p *recordingMandible) Heartbeat(ctx context.Context, req *mantisv1.HeartbeatRequest) (*mantisv1.HeartbeatResponse, error) {
	return forwardRecorded(p, "Heartbeat", ctx, req, p.next.Heartbeat)
}

func (p *recordingMandible) FetchPendingCommands(ctx context.Context, req *mantisv1.FetchPendingCommandsRequest) (*mantisv1.FetchPendingCommandsResponse, error) {
	if len(req.GetCommandIds()) > 0 && p.failNudgeClaims.Load() {
		return forwardRecorded(p, "FetchPendingCommands", ctx, req, func(context.Context, *mantisv1.FetchPendingCommandsRequest, ...grpc.CallOption) (*mantisv1.FetchPendingCommandsResponse, error) {
			return nil, status.Error(codes.Unavailable, "mandible unreachable (test)")
		})
	}
	return forwardRecorded(p, "FetchPendingCommands", ctx, req, p.next.FetchPendingCommands)
}

func (p *recordingMandible) StoreCommandResult(ctx context.Context, req *mantisv1.StoreCommandResultRequest) (*mantisv1.StoreCommandResultResponse, error) {
	return forwardRecorded(p, "StoreCommandResult", ctx, req, p.next.StoreCommandResult)
}

func (p *recordingMandible) ScheduleRedispatch(ctx context.Context, req *mantisv1.ScheduleRedispatchRequest) (*mantisv1.ScheduleRedispatchResponse, error) {
	return forwardRecorded(p, "ScheduleRedispatch", ctx, req, p.next.ScheduleRedispatch)
}

func (p *recordingMandible) ReleaseCommands(ctx context.Context, req *mantisv1.ReleaseCommandsRequest) (*mantisv1.ReleaseCommandsResponse, error) {
	return forwardRecorded(p, "ReleaseCommands", ctx, req, p.next.ReleaseCommands)
}

// recordedFetch is one FetchPendingCommands call: the ids it named (a nudge's claim;
// none for a polling recordedFetch) and the ids Mandible handed over.
type recordedFetch struct {
	named, claimed []string
	code           codes.Code
}

func (p *recordingMandible) recordedFetches(instance string, nudged bool) []recordedFetch {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []recordedFetch
	for _, c := range p.calls {
		req, ok := c.req.(*mantisv1.FetchPendingCommandsRequest)
		if !ok || req.GetInstanceId() != instance || (len(req.GetCommandIds()) > 0) != nudged {
			continue
		}
		f := recordedFetch{named: req.GetCommandIds(), code: c.code}
		if resp, ok := c.resp.(*mantisv1.FetchPendingCommandsResponse); ok {
			for _, cmd := range resp.GetCommands() {
				f.claimed = append(f.claimed, cmd.GetId())
			}
		}
		out = append(out, f)
	}
	return out
}

// nudgeFetches are the claims nudges made, in order.
func (p *recordingMandible) nudgeFetches(instance string) []recordedFetch {
	return p.recordedFetches(instance, true)
}

// pollFetches are the polling tick's fetches, in order.
func (p *recordingMandible) pollFetches(instance string) []recordedFetch {
	return p.recordedFetches(instance, false)
}

// calledFor counts the calls of method that named commandID.
func (p *recordingMandible) calledFor(method, commandID string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, c := range p.calls {
		if c.method != method {
			continue
		}
		switch req := c.req.(type) {
		case *mantisv1.FetchPendingCommandsRequest:
			if slices.Contains(req.GetCommandIds(), commandID) {
				n++
			}
		case *mantisv1.ScheduleRedispatchRequest:
			if req.GetCommandId() == commandID {
				n++
			}
		}
	}
	return n
}

// recordingAgent is a listen-mode agent that records every command it is asked
// to run and succeeds; commands named "hold" wait until release.
type recordingAgent struct {
	mantisv1.UnimplementedAgentServiceServer
	addr    string
	started chan string
	gate    chan struct{}
	once    sync.Once

	mu   sync.Mutex
	runs map[string]int
}

func startRecordingAgent(t *testing.T) *recordingAgent {
	t.Helper()
	a := &recordingAgent{started: make(chan string, 10000), gate: make(chan struct{}), runs: map[string]int{}}
	server := grpc.NewServer()
	mantisv1.RegisterAgentServiceServer(server, a)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a.addr = ln.Addr().String()
	go func() { _ = server.Serve(ln) }()
	t.Cleanup(func() {
		a.release()
		server.Stop()
	})
	return a
}

func (a *recordingAgent) RunCommand(ctx context.Context, req *mantisv1.RunCommandRequest) (*mantisv1.RunCommandResponse, error) {
	a.mu.Lock()
	a.runs[req.GetCommand().GetId()]++
	a.mu.Unlock()
	a.started <- req.GetCommand().GetId()
	if req.GetCommand().GetCommand() == "hold" {
		select {
		case <-a.gate:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	now := timestamppb.Now()
	return &mantisv1.RunCommandResponse{Result: &mantisv1.CommandResult{ExitCode: 0, Output: []byte("ok"), StartedAt: now, FinishedAt: now}}, nil
}

func (a *recordingAgent) release() { a.once.Do(func() { close(a.gate) }) }

// runCounts returns how often each command was run.
func (a *recordingAgent) runCounts() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.runs)
}

// recordingLogs is the slog handler of an in-process Thorax: it keeps every
// record for the test to look for and writes it to the test's output.
type recordingLogs struct {
	text slog.Handler
	mu   *sync.Mutex
	recs *[]recordedLog
}

type recordedLog struct {
	msg   string
	attrs map[string]string
}

func newRecordingLogs(t *testing.T) *recordingLogs {
	return &recordingLogs{
		text: slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}),
		mu:   &sync.Mutex{},
		recs: &[]recordedLog{},
	}
}

func (l *recordingLogs) Enabled(context.Context, slog.Level) bool { return true }

func (l *recordingLogs) Handle(ctx context.Context, r slog.Record) error {
	rec := recordedLog{msg: r.Message, attrs: map[string]string{}}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[a.Key] = a.Value.String()
		return true
	})
	l.mu.Lock()
	*l.recs = append(*l.recs, rec)
	l.mu.Unlock()
	return l.text.Handle(ctx, r)
}

func (l *recordingLogs) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &recordingLogs{text: l.text.WithAttrs(attrs), mu: l.mu, recs: l.recs}
}

func (l *recordingLogs) WithGroup(name string) slog.Handler {
	return &recordingLogs{text: l.text.WithGroup(name), mu: l.mu, recs: l.recs}
}

// matching returns the records with message msg whose attributes include
// every key=value pair of kv.
func (l *recordingLogs) matching(msg string, kv ...string) []recordedLog {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []recordedLog
next:
	for _, r := range *l.recs {
		if r.msg != msg {
			continue
		}
		for i := 0; i+1 < len(kv); i += 2 {
			if r.attrs[kv[i]] != kv[i+1] {
				continue next
			}
		}
		out = append(out, r)
	}
	return out
}
