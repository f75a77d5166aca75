package identity_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/mantis-deploy/mantis/internal/devcerts"
	"github.com/mantis-deploy/mantis/internal/identity"
	"github.com/mantis-deploy/mantis/internal/tlsconf"
)

// whoService answers each call with the identity the guard put in its context,
// as a unary call and as a server stream.
var whoService = grpc.ServiceDesc{
	ServiceName: "test.Who",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new(emptypb.Empty)
			if err := dec(in); err != nil {
				return nil, err
			}
			handler := func(ctx context.Context, _ any) (any, error) {
				id, _ := identity.FromContext(ctx)
				return wrapperspb.String(id.String()), nil
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{FullMethod: "/test.Who/Unary"}, handler)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		Handler: func(_ any, stream grpc.ServerStream) error {
			id, _ := identity.FromContext(stream.Context())
			return stream.SendMsg(wrapperspb.String(id.String()))
		},
	}},
}

type guardSetup struct {
	certs    devcerts.Bundle
	addr     string
	registry *prometheus.Registry
	logs     *bytes.Buffer
}

func setupGuard(t *testing.T, allow ...identity.Role) guardSetup {
	t.Helper()
	certs, err := devcerts.Generate(t.TempDir(), nil)
	require.NoError(t, err)
	cert, key := certs.Pair("mandible")
	tc, err := tlsconf.Server(tlsconf.Files{CA: certs.CACert(), Cert: cert, Key: key})
	require.NoError(t, err)
	s := guardSetup{certs: certs, registry: prometheus.NewRegistry(), logs: &bytes.Buffer{}}
	guard := &identity.Guard{
		Link: "test_link", Allow: allow,
		Logger:  slog.New(slog.NewJSONHandler(s.logs, nil)),
		Metrics: identity.NewMetrics(s.registry),
	}
	srv := grpc.NewServer(append(guard.ServerOptions(), grpc.Creds(credentials.NewTLS(tc)))...)
	srv.RegisterService(&whoService, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	s.addr = ln.Addr().String()
	return s
}

// call calls both methods presenting the pair and returns what each answered.
func (s guardSetup) call(t *testing.T, cert, key string) (unary, stream string, unaryErr, streamErr error) {
	t.Helper()
	tc, err := tlsconf.Client(tlsconf.Files{CA: s.certs.CACert(), Cert: cert, Key: key}, "localhost")
	require.NoError(t, err)
	conn, err := grpc.NewClient(s.addr, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	require.NoError(t, err)
	defer conn.Close()
	ctx := t.Context()
	out := new(wrapperspb.StringValue)
	unaryErr = conn.Invoke(ctx, "/test.Who/Unary", &emptypb.Empty{}, out)
	unary = out.GetValue()
	cs, err := conn.NewStream(ctx, &whoService.Streams[0], "/test.Who/Stream")
	require.NoError(t, err)
	require.NoError(t, cs.CloseSend())
	out = new(wrapperspb.StringValue)
	streamErr = cs.RecvMsg(out)
	return unary, out.GetValue(), unaryErr, streamErr
}

func TestGuardAdmitsAllowedRoles(t *testing.T) {
	t.Parallel()
	s := setupGuard(t, identity.RoleThorax)
	cert, key, err := s.certs.Issue(identity.RoleThorax, "thorax-1", nil)
	require.NoError(t, err)
	unary, stream, unaryErr, streamErr := s.call(t, cert, key)
	require.NoError(t, unaryErr)
	require.NoError(t, streamErr)
	require.Equal(t, "thorax/thorax-1", unary)
	require.Equal(t, "thorax/thorax-1", stream)
}

func TestGuardRefusesOtherRoles(t *testing.T) {
	t.Parallel()
	s := setupGuard(t, identity.RoleThorax)
	for _, role := range []identity.Role{identity.RoleAgent, identity.RoleClient, identity.RoleMandible} {
		cert, key, err := s.certs.Issue(role, "web-1", nil)
		require.NoError(t, err)
		_, _, unaryErr, streamErr := s.call(t, cert, key)
		for _, err := range []error{unaryErr, streamErr} {
			require.Equal(t, codes.PermissionDenied, status.Code(err), role)
			require.Equal(t, "thorax role required, certificate presents "+string(role)+"/web-1", status.Convert(err).Message())
		}
		require.Equal(t, 2.0, metricValue(t, s.registry, identity.RefusalsMetric, map[string]string{"link": "test_link", "expected": "thorax", "presented": string(role)}))
	}
	require.Contains(t, s.logs.String(), `"msg":"refused call for its identity"`)
	require.Contains(t, s.logs.String(), `"presented":"agent"`)
}

func TestGuardRefusesACertificateWithoutIdentity(t *testing.T) {
	t.Parallel()
	s := setupGuard(t, identity.RoleThorax)
	// A certificate of the same CA from before identities carries no URI SAN.
	cert, key := legacyPair(t, s.certs)
	_, _, unaryErr, streamErr := s.call(t, cert, key)
	require.Equal(t, codes.PermissionDenied, status.Code(streamErr))
	require.Equal(t, codes.PermissionDenied, status.Code(unaryErr))
	require.Contains(t, status.Convert(unaryErr).Message(), `thorax role required, certificate "legacy" presents no identity`)
	require.Equal(t, 2.0, metricValue(t, s.registry, identity.RefusalsMetric, map[string]string{"link": "test_link", "expected": "thorax", "presented": "none"}))
}

func TestGuardRefusesPlaintext(t *testing.T) {
	t.Parallel()
	guard := &identity.Guard{Link: "plain", Allow: []identity.Role{identity.RoleThorax}, Logger: slog.New(slog.DiscardHandler)}
	srv := grpc.NewServer(guard.ServerOptions()...)
	srv.RegisterService(&whoService, struct{}{})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	err = conn.Invoke(t.Context(), "/test.Who/Unary", &emptypb.Empty{}, new(wrapperspb.StringValue))
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	require.Equal(t, "thorax role required, the call presents no verified certificate", status.Convert(err).Message())
}

// metricValue returns the value of the named counter or gauge with exactly the
// given labels; 0 when there is none.
func metricValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			pairs := m.GetLabel()
			match := len(pairs) == len(labels)
			for _, p := range pairs {
				match = match && labels[p.GetName()] == p.GetValue()
			}
			if match {
				return m.GetCounter().GetValue() + m.GetGauge().GetValue()
			}
		}
	}
	return 0
}
