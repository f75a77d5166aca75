package thorax

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// waitFor bounds every wait of these tests for something that should happen.
const waitFor = 10 * time.Second

// fakeMandible is a MandibleService that hands out the commands a test queues
// and records every call.
type fakeMandible struct {
	mantisv1.UnimplementedMandibleServiceServer

	mu sync.Mutex
	// failRegistrations answers the first n RegisterInstance calls UNAVAILABLE.
	failRegistrations int
	registrations     int
	dead              map[string]bool
	pending           []*mantisv1.Command
	epoch             int64
	heartbeats        []*mantisv1.HeartbeatRequest
	// cancelled is what every heartbeat answers as cancelled_command_ids.
	cancelled        []string
	fetches          []*mantisv1.FetchPendingCommandsRequest
	redispatchAnswer *mantisv1.ScheduleRedispatchResponse

	// holdClaims, when set before the fake serves, holds the answer of every
	// claim that took a command until it is closed; claimed hears of each.
	holdClaims chan struct{}
	claimed    chan struct{}

	stored       chan *mantisv1.StoreCommandResultRequest
	redispatches chan *mantisv1.ScheduleRedispatchRequest
	releases     chan *mantisv1.ReleaseCommandsRequest
}

func newFakeMandible() *fakeMandible {
	return &fakeMandible{
		dead:             map[string]bool{},
		epoch:            100,
		redispatchAnswer: &mantisv1.ScheduleRedispatchResponse{Scheduled: true, NextAttemptAt: timestamppb.Now()},
		stored:           make(chan *mantisv1.StoreCommandResultRequest, 100),
		redispatches:     make(chan *mantisv1.ScheduleRedispatchRequest, 100),
		releases:         make(chan *mantisv1.ReleaseCommandsRequest, 100),
	}
}

// queue makes commands claimable; a command without a lease epoch gets the
// next one when claimed.
func (m *fakeMandible) queue(cmds ...*mantisv1.Command) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = append(m.pending, cmds...)
}

// cancel makes heartbeats answer ids as cancelled.
func (m *fakeMandible) cancel(ids ...string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.cancelled = append(m.cancelled, ids...)
}

func (m *fakeMandible) markDead(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dead[id] = true
}

// instanceID is the id the fake issues at its nth registration: a UUID, as
// Mandible issues.
func instanceID(n int) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, fmt.Appendf(nil, "instance-%d", n)).String()
}

// checkUUIDs answers INVALID_ARGUMENT, as Mandible does, for an id that is not
// a UUID.
func checkUUIDs(fields map[string]string) error {
	for field, v := range fields {
		if _, err := uuid.Parse(v); err != nil {
			return status.Errorf(codes.InvalidArgument, "%s: must be a UUID, got %q", field, v)
		}
	}
	return nil
}

func (m *fakeMandible) live(id string) error {
	if err := checkUUIDs(map[string]string{"instance_id": id}); err != nil {
		return err
	}
	if m.dead[id] {
		return status.Errorf(codes.FailedPrecondition, "instance %q is unknown or dead: register again", id)
	}
	return nil
}

func (m *fakeMandible) RegisterInstance(_ context.Context, req *mantisv1.RegisterInstanceRequest) (*mantisv1.RegisterInstanceResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if req.GetName() == "" {
		return nil, status.Error(codes.InvalidArgument, "name: required")
	}
	if m.failRegistrations > 0 {
		m.failRegistrations--
		return nil, status.Error(codes.Unavailable, "not ready yet")
	}
	m.registrations++
	return &mantisv1.RegisterInstanceResponse{
		InstanceId:       instanceID(m.registrations),
		HeartbeatTimeout: durationpb.New(15 * time.Second),
	}, nil
}

func (m *fakeMandible) Heartbeat(_ context.Context, req *mantisv1.HeartbeatRequest) (*mantisv1.HeartbeatResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(req.GetInstanceId()); err != nil {
		return nil, err
	}
	m.heartbeats = append(m.heartbeats, proto.Clone(req).(*mantisv1.HeartbeatRequest))
	return &mantisv1.HeartbeatResponse{ListenTargets: []string{"web-listen"}, CancelledCommandIds: m.cancelled}, nil
}

// FetchPendingCommands claims listen-mode commands (all assigned to the
// caller, in this fake) and the commands of the poll targets it names. With
// holdClaims set, a call that claimed something signals claimed and answers only
// once holdClaims is closed, whatever the caller does meanwhile: as Mandible,
// whose claim is committed even if the caller has gone.
func (m *fakeMandible) FetchPendingCommands(ctx context.Context, req *mantisv1.FetchPendingCommandsRequest) (*mantisv1.FetchPendingCommandsResponse, error) {
	resp, err := m.claimPending(req)
	if err == nil && len(resp.GetCommands()) > 0 && m.holdClaims != nil {
		m.claimed <- struct{}{}
		<-m.holdClaims
	}
	return resp, err
}

// claimPending is FetchPendingCommands' claim.
func (m *fakeMandible) claimPending(req *mantisv1.FetchPendingCommandsRequest) (*mantisv1.FetchPendingCommandsResponse, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.live(req.GetInstanceId()); err != nil {
		return nil, err
	}
	for i, id := range req.GetCommandIds() {
		if err := checkUUIDs(map[string]string{fmt.Sprintf("command_ids[%d]", i): id}); err != nil {
			return nil, err
		}
	}
	if n := req.GetMaxCommands(); n < 1 || n > 1000 {
		return nil, status.Errorf(codes.InvalidArgument, "max_commands: must be 1-1000, got %d", n)
	}
	m.fetches = append(m.fetches, proto.Clone(req).(*mantisv1.FetchPendingCommandsRequest))
	var claimed []*mantisv1.Command
	kept := m.pending[:0]
	for _, c := range m.pending {
		ok := len(claimed) < int(req.GetMaxCommands()) &&
			(c.GetMode() == modeListen || slices.Contains(req.GetPollTargets(), c.GetTarget())) &&
			(len(req.GetCommandIds()) == 0 || slices.Contains(req.GetCommandIds(), c.GetId()))
		if !ok {
			kept = append(kept, c)
			continue
		}
		c = proto.Clone(c).(*mantisv1.Command)
		if c.LeaseEpoch == 0 {
			m.epoch++
			c.LeaseEpoch = m.epoch
		}
		claimed = append(claimed, c)
	}
	m.pending = kept
	return &mantisv1.FetchPendingCommandsResponse{Commands: claimed}, nil
}

func (m *fakeMandible) StoreCommandResult(_ context.Context, req *mantisv1.StoreCommandResultRequest) (*mantisv1.StoreCommandResultResponse, error) {
	if err := checkUUIDs(map[string]string{"command_id": req.GetCommandId()}); err != nil {
		return nil, err
	}
	if len(req.GetResult().GetOutput()) > 1<<20 {
		return nil, status.Error(codes.InvalidArgument, "result.output: at most 1048576 bytes")
	}
	m.mu.Lock()
	err := m.live(req.GetInstanceId())
	m.mu.Unlock()
	if err != nil {
		return nil, err
	}
	m.stored <- req
	return &mantisv1.StoreCommandResultResponse{}, nil
}

func (m *fakeMandible) ScheduleRedispatch(_ context.Context, req *mantisv1.ScheduleRedispatchRequest) (*mantisv1.ScheduleRedispatchResponse, error) {
	if err := checkUUIDs(map[string]string{"instance_id": req.GetInstanceId(), "command_id": req.GetCommandId()}); err != nil {
		return nil, err
	}
	m.mu.Lock()
	answer := m.redispatchAnswer
	m.mu.Unlock()
	m.redispatches <- req
	return answer, nil
}

func (m *fakeMandible) ReleaseCommands(_ context.Context, req *mantisv1.ReleaseCommandsRequest) (*mantisv1.ReleaseCommandsResponse, error) {
	if err := checkUUIDs(map[string]string{"instance_id": req.GetInstanceId()}); err != nil {
		return nil, err
	}
	m.releases <- req
	return &mantisv1.ReleaseCommandsResponse{Released: int32(len(req.GetCommands()))}, nil
}

func (m *fakeMandible) heartbeatList() []*mantisv1.HeartbeatRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.heartbeats)
}

func (m *fakeMandible) fetchList() []*mantisv1.FetchPendingCommandsRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.fetches)
}

// waitFetchFor waits for a claim that includes the poll target.
func (m *fakeMandible) waitFetchFor(t *testing.T, target string) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, fe := range m.fetchList() {
			if slices.Contains(fe.GetPollTargets(), target) {
				return true
			}
		}
		return false
	}, waitFor, 10*time.Millisecond)
}

func (m *fakeMandible) pendingCount() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// fakeAgent is a listen-mode agent's AgentService.
type fakeAgent struct {
	mantisv1.UnimplementedAgentServiceServer
	// block, when set, holds every RunCommand until it is closed.
	block chan struct{}
	// fail, when set, is every RunCommand's answer.
	fail error
	// output, when set, is every command's output.
	output []byte
	// calls receives each command with the common name of the caller's
	// certificate.
	calls chan agentCall
	// cancels receives the id of each CancelCommand; the first one ends a
	// blocked RunCommand as cancelled.
	cancels   chan string
	cancelled chan struct{}
}

func (a *fakeAgent) CancelCommand(_ context.Context, req *mantisv1.CancelCommandRequest) (*mantisv1.CancelCommandResponse, error) {
	select {
	case <-a.cancelled:
	default:
		close(a.cancelled)
	}
	a.cancels <- req.GetCommandId()
	return &mantisv1.CancelCommandResponse{}, nil
}

type agentCall struct {
	cmd        *mantisv1.Command
	commonName string
}

func (a *fakeAgent) RunCommand(ctx context.Context, req *mantisv1.RunCommandRequest) (*mantisv1.RunCommandResponse, error) {
	a.calls <- agentCall{cmd: req.GetCommand(), commonName: peerCommonName(ctx)}
	if a.fail != nil {
		return nil, a.fail
	}
	if a.block != nil {
		select {
		case <-a.cancelled:
			return &mantisv1.RunCommandResponse{Result: &mantisv1.CommandResult{ExitCode: -1, Cancelled: true}}, nil
		case <-a.block:
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		}
	}
	output := a.output
	if output == nil {
		output = []byte("ran " + req.GetCommand().GetCommand())
	}
	now := timestamppb.Now()
	return &mantisv1.RunCommandResponse{Result: &mantisv1.CommandResult{
		ExitCode:   0,
		Output:     output,
		StartedAt:  now,
		FinishedAt: now,
	}}, nil
}

func peerCommonName(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return ""
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return ""
	}
	return info.State.PeerCertificates[0].Subject.CommonName
}

// serve starts a gRPC server with mutual TLS on a free local port, presenting
// the named pair, and returns its address.
func serve(t *testing.T, certs devcerts.Bundle, pair string, register func(*grpc.Server)) string {
	t.Helper()
	cert, key := certs.Pair(pair)
	return serveWith(t, certs, cert, key, register)
}

// serveAs is serve presenting a pair the CA issues for role and name.
func serveAs(t *testing.T, certs devcerts.Bundle, role identity.Role, name string, register func(*grpc.Server)) string {
	t.Helper()
	cert, key, err := certs.Issue(role, name, nil)
	require.NoError(t, err)
	return serveWith(t, certs, cert, key, register)
}

// serveWith is serve presenting the pair at cert and key.
func serveWith(t *testing.T, certs devcerts.Bundle, cert, key string, register func(*grpc.Server)) string {
	t.Helper()
	tc, err := tlsconf.Server(tlsconf.Files{CA: certs.CACert(), Cert: cert, Key: key})
	require.NoError(t, err)
	server := grpc.NewServer(grpc.Creds(credentials.NewTLS(tc)))
	register(server)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = server.Serve(ln) }()
	t.Cleanup(server.Stop)
	return ln.Addr().String()
}

// fixture is what a test of a running Thorax needs.
type fixture struct {
	certs    devcerts.Bundle
	mandible *fakeMandible
	cfg      config.Thorax
	// tune, when set, adjusts the instance before it runs.
	tune func(*Thorax)
}

func setup(t *testing.T) *fixture {
	t.Helper()
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	m := newFakeMandible()
	addr := serve(t, certs, "mandible", func(s *grpc.Server) { mantisv1.RegisterMandibleServiceServer(s, m) })

	cert, key := certs.Pair("thorax")
	files := config.TLS{CACertPath: certs.CACert(), CertPath: cert, KeyPath: key}
	cfg := config.DefaultThorax()
	cfg.Name = "thorax-test"
	cfg.Mandible = config.Endpoint{Address: addr, TLS: files}
	cfg.Agents.Listen = "127.0.0.1:0"
	cfg.Agents.TLS = files
	cfg.Polling.Interval.Duration = 20 * time.Millisecond
	cfg.Polling.FallbackInterval.Duration = 20 * time.Millisecond
	cfg.Heartbeat.Interval.Duration = 20 * time.Millisecond
	cfg.Drain.Timeout.Duration = waitFor
	require.NoError(t, cfg.Validate())
	return &fixture{certs: certs, mandible: m, cfg: cfg}
}

// running is a started instance and the means to stop it.
type running struct {
	*Thorax
	stop func()
	done chan error
}

// start runs an instance until the test ends (or stop), and waits until it
// is ready.
func (f *fixture) start(t *testing.T) *running {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	th, err := New(f.cfg, logger)
	require.NoError(t, err)
	if f.tune != nil {
		f.tune(th)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- th.Run(ctx) }()
	r := &running{Thorax: th, stop: cancel, done: done}
	t.Cleanup(func() {
		cancel()
		require.NoError(t, r.wait(t))
	})
	select {
	case <-th.Ready():
	case err := <-done:
		t.Fatalf("thorax stopped before it was ready: %v", err)
	case <-time.After(waitFor):
		t.Fatal("thorax did not become ready")
	}
	return r
}

// wait returns what Run returned, failing the test when it does not return
// within twice waitFor (a drain may take waitFor).
func (r *running) wait(t *testing.T) error {
	t.Helper()
	select {
	case err := <-r.done:
		r.done <- err // for the next wait
		return err
	case <-time.After(2 * waitFor):
		t.Fatal("thorax did not stop")
		return nil
	}
}

// startAgent serves agent as the listen-mode agent of listenTarget and returns
// its address.
func (f *fixture) startAgent(t *testing.T, agent *fakeAgent) string {
	t.Helper()
	return f.startAgentAs(t, agent, listenTarget)
}

// startAgentAs serves agent presenting the certificate of the agent of target.
func (f *fixture) startAgentAs(t *testing.T, agent *fakeAgent, target string) string {
	t.Helper()
	if agent.calls == nil {
		agent.calls = make(chan agentCall, 100)
	}
	agent.cancels = make(chan string, 100)
	agent.cancelled = make(chan struct{})
	return serveAs(t, f.certs, identity.RoleAgent, target, func(s *grpc.Server) { mantisv1.RegisterAgentServiceServer(s, agent) })
}

// pollClient connects to the instance's agents server as the poll-mode agent of
// target web-poll, presenting a pair issued for agent/web-poll.
func (f *fixture) pollClient(t *testing.T, r *running) mantisv1.ThoraxServiceClient {
	t.Helper()
	return f.pollClientFor(t, r, "web-poll")
}

// pollClientFor connects as the poll-mode agent of target.
func (f *fixture) pollClientFor(t *testing.T, r *running, target string) mantisv1.ThoraxServiceClient {
	t.Helper()
	return f.clientAs(t, r, identity.RoleAgent, target)
}

// clientAs connects to the instance's agents server presenting a pair issued
// for role and name.
func (f *fixture) clientAs(t *testing.T, r *running, role identity.Role, name string) mantisv1.ThoraxServiceClient {
	t.Helper()
	cert, key, err := f.certs.Issue(role, name, nil)
	require.NoError(t, err)
	return thoraxClient(t, r.AgentsAddr(), tlsconf.Files{CA: f.certs.CACert(), Cert: cert, Key: key})
}

func thoraxClient(t *testing.T, addr string, files tlsconf.Files) mantisv1.ThoraxServiceClient {
	t.Helper()
	tc, err := tlsconf.Client(files, "")
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return mantisv1.NewThoraxServiceClient(conn)
}

// receive returns the next value of ch, failing the test after waitFor.
func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		var zero T
		t.Fatalf("nothing received within %s", waitFor)
		return zero
	}
}

// commandID returns the command id (a UUID, as Mandible issues) a test
// names name.
func commandID(name string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte(name)).String()
}

// listenTarget is the target of listenCommand, and the name the certificate of
// startAgent's agent carries.
const listenTarget = "web-listen"

func listenCommand(name, agentAddr string, epoch int64) *mantisv1.Command {
	return &mantisv1.Command{
		Id: commandID(name), Target: listenTarget, Mode: modeListen, Command: "echo " + name,
		Timeout: durationpb.New(30 * time.Second), Priority: "normal",
		LeaseEpoch: epoch, ListenAddress: agentAddr,
	}
}

func pollCommand(name, target string, epoch int64) *mantisv1.Command {
	return &mantisv1.Command{
		Id: commandID(name), Target: target, Mode: modePoll, Command: "echo " + name,
		Timeout: durationpb.New(30 * time.Second), Priority: "normal", LeaseEpoch: epoch,
	}
}
