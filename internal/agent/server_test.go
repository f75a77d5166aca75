package agent_test

import (
	"context"
	"crypto/tls"
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/mantis-deploy/mantis/internal/agent"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
	mantisv1 "github.com/mantis-deploy/mantis/proto/mantis/v1"
)

// listenSetup is the listen-mode agent of target web-1 (the target of command)
// serving on loopback with a pair issued for agent/web-1, accepting only the
// thorax role.
type listenSetup struct {
	certs  devcerts.Bundle
	addr   string
	runner *agent.Runner
	// registry holds the server's refusal counter.
	registry *prometheus.Registry
}

func setupListen(t *testing.T, change func(*config.Exec)) listenSetup {
	t.Helper()
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	cert, key, err := certs.Issue(identity.RoleAgent, "web-1", nil)
	require.NoError(t, err)
	lc := config.DefaultAgent().Listen
	lc.TLS = config.TLS{CACertPath: certs.CACert(), CertPath: cert, KeyPath: key}
	creds, err := agent.ListenCredentials(lc)
	require.NoError(t, err)

	runner := agent.NewRunner(execConfig(change), openJournal(t, t.TempDir(), nil), testLogger(t))
	registry := prometheus.NewRegistry()
	srv := agent.NewServer("web-1", runner, testLogger(t))
	srv.Metrics = identity.NewMetrics(registry)
	gs := agent.NewGRPCServer(srv, creds)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	return listenSetup{certs: certs, addr: lis.Addr().String(), runner: runner, registry: registry}
}

// dial returns an AgentService client that trusts ca and presents the pair
// (none when cert is ""); the connection closes when the test ends.
func dial(t *testing.T, addr, ca, cert, key string) (mantisv1.AgentServiceClient, *grpc.ClientConn) {
	t.Helper()
	tc, err := tlsconf.Client(tlsconf.Files{CA: ca, Cert: cert, Key: key}, "")
	require.NoError(t, err)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return mantisv1.NewAgentServiceClient(conn), conn
}

// thorax returns a client presenting Thorax's certificate.
func (s listenSetup) thorax(t *testing.T) (mantisv1.AgentServiceClient, *grpc.ClientConn) {
	cert, key := s.certs.Pair("thorax")
	return dial(t, s.addr, s.certs.CACert(), cert, key)
}

// tlsHandshake connects to addr with plain TLS and reads the first record.
// The server judges a TLS 1.3 client's certificate after the client has
// finished its half of the handshake, so a refusal shows as the server's
// alert on that first read; an accepted client reads gRPC's settings frame.
func tlsHandshake(t *testing.T, addr, ca, cert, key string) error {
	t.Helper()
	tc, err := tlsconf.Client(tlsconf.Files{CA: ca, Cert: cert, Key: key}, "127.0.0.1")
	require.NoError(t, err)
	tc.NextProtos = []string{"h2"}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, tc)
	if err != nil {
		return err
	}
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(10*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	return err
}

func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestListenRunsCommandForThorax(t *testing.T) {
	t.Parallel()
	s := setupListen(t, nil)
	client, _ := s.thorax(t)

	cmd := command("echo hello from $(basename $0)")
	cmd.Timeout = durationpb.New(10 * time.Second)
	resp, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: cmd})
	require.NoError(t, err)
	require.Equal(t, int32(0), resp.Result.ExitCode)
	require.Equal(t, "hello from sh\n", string(resp.Result.Output))
	require.NotNil(t, resp.Result.StartedAt)
	require.NotNil(t, resp.Result.FinishedAt)
}

func TestListenRefusesEveryoneButThorax(t *testing.T) {
	t.Parallel()
	s := setupListen(t, nil)
	other, err := devcerts.Generate(t.TempDir(), nil) // another CA
	require.NoError(t, err)
	marker := filepath.Join(t.TempDir(), "ran")

	otherCert, otherKey := other.Pair("thorax")
	cases := []struct {
		name, cert, key string
	}{
		{"no certificate", "", ""},
		{"thorax certificate from another CA", otherCert, otherKey},
	}
	for _, tc := range cases {
		client, _ := dial(t, s.addr, s.certs.CACert(), tc.cert, tc.key)
		_, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: command("touch " + marker)})
		require.Error(t, err, tc.name)
		require.Equal(t, codes.Unavailable, status.Code(err), "%s: refused before any call: %v", tc.name, err)
		require.ErrorContains(t, tlsHandshake(t, s.addr, s.certs.CACert(), tc.cert, tc.key), "remote error: tls: ", tc.name)
		_, err = client.CancelCommand(callCtx(t), &mantisv1.CancelCommandRequest{CommandId: "x"})
		require.Equal(t, codes.Unavailable, status.Code(err), tc.name)
	}
	// Certificates of the CA but of another role pass the handshake and are
	// refused at each call, naming the role expected and the one presented.
	web1Cert, web1Key, err := s.certs.Issue(identity.RoleAgent, "web-1", nil)
	require.NoError(t, err)
	agentCert, agentKey := s.certs.Pair("agent")
	clientCert, clientKey := s.certs.Pair("client")
	// Mandible's own pair: the control plane does not call agents, Thorax does.
	mandibleCert, mandibleKey := s.certs.Pair("mandible")
	for _, tc := range []struct{ presents, cert, key string }{
		{"agent/web-1", web1Cert, web1Key},
		{"agent/agent", agentCert, agentKey},
		{"client/client", clientCert, clientKey},
		{"mandible/mandible", mandibleCert, mandibleKey},
	} {
		client, _ := dial(t, s.addr, s.certs.CACert(), tc.cert, tc.key)
		_, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: command("touch " + marker)})
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%s: %v", tc.presents, err)
		require.Equal(t, "thorax role required, certificate presents "+tc.presents, status.Convert(err).Message())
		_, err = client.CancelCommand(callCtx(t), &mantisv1.CancelCommandRequest{CommandId: "x"})
		require.Equal(t, codes.PermissionDenied, status.Code(err), tc.presents)
	}
	require.Equal(t, 4.0, refusals(t, s.registry, "agent"))
	require.Equal(t, 2.0, refusals(t, s.registry, "client"))
	require.Equal(t, 2.0, refusals(t, s.registry, "mandible"))
	require.NoFileExists(t, marker, "no refused client ran anything")

	// The server is unharmed: Thorax still gets through.
	thoraxCert, thoraxKey := s.certs.Pair("thorax")
	require.NoError(t, tlsHandshake(t, s.addr, s.certs.CACert(), thoraxCert, thoraxKey))
	client, _ := s.thorax(t)
	_, err = client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: command("touch " + marker)})
	require.NoError(t, err)
	require.FileExists(t, marker)
}

func TestListenRejectsMalformedRequests(t *testing.T) {
	t.Parallel()
	s := setupListen(t, nil)
	client, _ := s.thorax(t)

	cases := []struct {
		cmd   *mantisv1.Command
		field string
	}{
		{nil, "command: required"},
		{&mantisv1.Command{Id: "not-a-uuid", Command: "true"}, "command.id: must be a UUID"},
		{&mantisv1.Command{Command: "true"}, "command.id: required"},
		{func() *mantisv1.Command { c := command(""); return c }(), "command.command: required"},
		{func() *mantisv1.Command { c := command("true"); c.Timeout = durationpb.New(-time.Second); return c }(), "command.timeout"},
	}
	for _, tc := range cases {
		_, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: tc.cmd})
		require.Equal(t, codes.InvalidArgument, status.Code(err), tc.field)
		require.Contains(t, status.Convert(err).Message(), tc.field)
	}

	_, err := client.CancelCommand(callCtx(t), &mantisv1.CancelCommandRequest{})
	require.Equal(t, codes.InvalidArgument, status.Code(err))
	require.Contains(t, status.Convert(err).Message(), "command_id")
	_, err = client.CancelCommand(callCtx(t), &mantisv1.CancelCommandRequest{CommandId: command("").Id})
	require.Equal(t, codes.NotFound, status.Code(err))
}

func TestListenLimitsAndCancels(t *testing.T) {
	t.Parallel()
	s := setupListen(t, func(c *config.Exec) { c.MaxConcurrent = 1 })
	client, _ := s.thorax(t)
	pipe := fifo(t)

	blocker := withRequest(command("cat " + pipe))
	done := make(chan outcome, 1)
	go func() {
		resp, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: blocker})
		done <- outcome{resp.GetResult(), err}
	}()
	openFIFO(t, pipe) // running

	_, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: command("true")})
	require.Equal(t, codes.ResourceExhausted, status.Code(err), "%v", err)
	// A redelivery of the running request takes no slot: it joins the run.
	redelivery := redeliver(blocker)
	joined := make(chan outcome, 1)
	go func() {
		resp, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: redelivery})
		joined <- outcome{resp.GetResult(), err}
	}()

	// Cancelling either delivery cancels the one run, for both.
	require.Eventually(t, func() bool {
		_, err := client.CancelCommand(callCtx(t), &mantisv1.CancelCommandRequest{CommandId: redelivery.Id})
		return err == nil
	}, 10*time.Second, 10*time.Millisecond, "the redelivery never joined")
	for _, ch := range []chan outcome{done, joined} {
		res := recv(t, ch).result(t)
		require.True(t, res.Cancelled)
		require.Equal(t, int32(-1), res.ExitCode)
	}

	resp, err := client.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: command("echo free")})
	require.NoError(t, err)
	require.Equal(t, "free\n", string(resp.Result.Output))
}

// A Thorax that goes away mid-call (a restart) does not stop the command: it
// finishes, and a Thorax that asks for the request again gets its result
// without a second run, while other requests run as before.
func TestListenOutlivesThoraxRestart(t *testing.T) {
	t.Parallel()
	s := setupListen(t, nil)
	first, conn := s.thorax(t)
	pipe, marker := fifo(t), filepath.Join(t.TempDir(), "runs")

	cmd := withRequest(command("echo run >> " + marker + "; cat " + pipe))
	done := make(chan error, 1)
	go func() {
		_, err := first.RunCommand(context.Background(), &mantisv1.RunCommandRequest{Command: cmd})
		done <- err
	}()
	w := openFIFO(t, pipe) // running
	require.NoError(t, conn.Close())
	require.Equal(t, codes.Canceled, status.Code(recv(t, done)))
	require.Equal(t, 3, s.runner.Free(), "the command outlives the call")
	_, err := w.WriteString("finished for nobody\n")
	require.NoError(t, err)
	require.NoError(t, w.Close())
	require.Eventually(t, func() bool { return s.runner.Free() == 4 }, 10*time.Second, 10*time.Millisecond)

	second, _ := s.thorax(t)
	resp, err := second.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: redeliver(cmd)})
	require.NoError(t, err)
	require.Equal(t, "finished for nobody\n", string(resp.Result.Output))
	require.Equal(t, "run\n", readFile(t, marker), "the request ran once")

	resp, err = second.RunCommand(callCtx(t), &mantisv1.RunCommandRequest{Command: command("echo still here")})
	require.NoError(t, err)
	require.Equal(t, "still here\n", string(resp.Result.Output))
}
