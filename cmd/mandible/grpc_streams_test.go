package main

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/rpc"
)

// One connection to Mandible's gRPC server holds at most rpc.MaxConcurrentStreams
// calls at once: with that many streams open, one more waits (here past its deadline)
// instead of starting a handler, and starts once another ends.
func TestGRPCServerCapsStreamsPerConnection(t *testing.T) {
	t.Parallel()
	srv, err := newGRPCServer(config.Listener{Listen: "127.0.0.1:0", TLS: config.TLS{Insecure: true}}, slog.New(slog.DiscardHandler), nil)
	require.NoError(t, err)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(srv.Stop)

	conn, err := grpc.NewClient(l.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	client := healthpb.NewHealthClient(conn)

	// Watch answers at once with the status, then stays open: one stream each.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cancels := make([]context.CancelFunc, 0, rpc.MaxConcurrentStreams)
	for range rpc.MaxConcurrentStreams {
		streamCtx, stop := context.WithCancel(ctx)
		cancels = append(cancels, stop)
		w, err := client.Watch(streamCtx, &healthpb.HealthCheckRequest{})
		require.NoError(t, err)
		_, err = w.Recv()
		require.NoError(t, err)
	}

	overCtx, overCancel := context.WithTimeout(ctx, time.Second)
	defer overCancel()
	over, err := client.Watch(overCtx, &healthpb.HealthCheckRequest{})
	if err == nil {
		_, err = over.Recv()
	}
	require.Equal(t, codes.DeadlineExceeded, status.Code(err), "a stream past the cap was served: %v", err)

	cancels[0]()
	require.Eventually(t, func() bool {
		callCtx, stop := context.WithTimeout(ctx, time.Second)
		defer stop()
		w, err := client.Watch(callCtx, &healthpb.HealthCheckRequest{})
		if err != nil {
			return false
		}
		_, err = w.Recv()
		return err == nil
	}, 10*time.Second, 50*time.Millisecond, "a stream ended makes room for another")
}
