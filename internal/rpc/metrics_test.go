package rpc_test

import (
	"context"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/rpc"
)

// setup serves the gRPC health service with the server interceptors of one
// registry and returns a client with the client interceptors of another.
func setup(t *testing.T) (healthpb.HealthClient, *prometheus.Registry, *prometheus.Registry) {
	t.Helper()
	serverReg, clientReg := prometheus.NewRegistry(), prometheus.NewRegistry()
	srv := grpc.NewServer(rpc.NewMetrics(serverReg).ServerOptions()...)
	hs := health.NewServer()
	hs.SetServingStatus("known", healthpb.HealthCheckResponse_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(),
		append(rpc.NewMetrics(clientReg).DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	return healthpb.NewHealthClient(conn), serverReg, clientReg
}

func TestCountsCallsByServiceMethodAndCode(t *testing.T) {
	t.Parallel()
	client, serverReg, clientReg := setup(t)
	ctx := context.Background()
	_, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: "known"})
	require.NoError(t, err)
	_, err = client.Check(ctx, &healthpb.HealthCheckRequest{Service: "unknown-service"})
	require.Equal(t, codes.NotFound, status.Code(err))

	for _, reg := range []*prometheus.Registry{serverReg, clientReg} {
		families, err := reg.Gather()
		require.NoError(t, err)
		counts := map[string]float64{}
		var observed uint64
		for _, f := range families {
			for _, m := range f.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				require.Equal(t, "grpc.health.v1.Health", labels["service"])
				require.Equal(t, "Check", labels["method"])
				if c := m.GetCounter(); c != nil {
					counts[labels["code"]] += c.GetValue()
				}
				if h := m.GetHistogram(); h != nil {
					observed += h.GetSampleCount()
				}
			}
		}
		require.Equal(t, map[string]float64{"OK": 1, "NotFound": 1}, counts)
		require.Equal(t, uint64(2), observed)
	}
	requireFamilies(t, serverReg, rpc.ServerHandledMetric, rpc.ServerDurationMetric)
	requireFamilies(t, clientReg, rpc.ClientHandledMetric, rpc.ClientDurationMetric)
}

// requireFamilies checks that reg holds exactly the families names.
func requireFamilies(t *testing.T, reg *prometheus.Registry, names ...string) {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var got []string
	for _, f := range families {
		got = append(got, f.GetName())
	}
	require.ElementsMatch(t, names, got)
}

func TestNewReusesMetricsAlreadyRegistered(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	require.NotPanics(t, func() { rpc.NewMetrics(reg); rpc.NewMetrics(reg) })
}

func TestNilMetricsAddNoInterceptors(t *testing.T) {
	t.Parallel()
	var m *rpc.Metrics
	require.Empty(t, m.ServerOptions())
	require.Empty(t, m.DialOptions())
}

func TestSplitMethod(t *testing.T) {
	t.Parallel()
	service, method := rpc.SplitMethod("/mantis.v1.MandibleService/Register")
	require.Equal(t, "mantis.v1.MandibleService", service)
	require.Equal(t, "Register", method)
	service, method = rpc.SplitMethod("odd")
	require.Equal(t, "unknown", service)
	require.Equal(t, "odd", method)
}
