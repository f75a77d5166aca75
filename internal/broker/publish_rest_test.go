package broker_test

import (
	"context"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/broker"
)

// A broker that accepts connections and then says nothing (a frozen node) bounds the
// first publish, and later publishes are skipped at once while the client rests: a
// delivery whose rows are committed never waits on the broker.
func TestPublishToAnUnansweringBrokerIsBoundedThenRests(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { _ = conn.Close() })
		}
	}()
	_, port, err := net.SplitHostPort(ln.Addr().String())
	require.NoError(t, err)
	p, err := strconv.Atoi(port)
	require.NoError(t, err)
	b := setup(t, false)
	cfg := b.cfg
	cfg.Host, cfg.Port = "127.0.0.1", p
	c := broker.NewClient(cfg, "rest-test", slog.New(slog.DiscardHandler))
	defer c.Close()

	nudge := []broker.Nudge{{CommandID: "c1", Target: "t", Mode: "poll", Priority: "normal"}}
	done := make(chan error, 1)
	go func() { done <- c.Publish(context.Background(), nudge) }()
	select {
	case err := <-done:
		require.Error(t, err)
	case <-time.After(time.Minute):
		t.Fatal("publish to an unanswering broker never returned")
	}
	start := time.Now()
	require.ErrorIs(t, c.Publish(context.Background(), nudge), broker.ErrResting)
	require.Less(t, time.Since(start), time.Second, "a resting client answers at once")
}
