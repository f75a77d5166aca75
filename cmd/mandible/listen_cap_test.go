package main

import (
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// Past http.max_connections a connection waits to be accepted until one closes: two
// connections that send nothing hold a listener capped at two, a third caller is
// not answered while they do, and is once one of them goes.
func TestHTTPListenerCapsConnections(t *testing.T) {
	t.Parallel()
	cfg := config.DefaultMandible().HTTP
	cfg.Listen, cfg.MaxConnections = "127.0.0.1:0", 2
	l, err := listenHTTP(cfg, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	srv := httpServer(cfg, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	addr := l.Addr().String()

	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		require.NoError(t, err)
		held = append(held, c)
		t.Cleanup(func() { c.Close() })
	}
	answered := make(chan int, 1)
	go func() {
		client := &http.Client{Timeout: 30 * time.Second}
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			answered <- 0
			return
		}
		resp.Body.Close()
		answered <- resp.StatusCode
	}()
	isAnswered := func() bool { return len(answered) > 0 }
	require.Never(t, isAnswered, time.Second, 20*time.Millisecond, "a third connection was served past the cap of two")
	held[0].Close()
	require.Eventually(t, isAnswered, 5*time.Second, 20*time.Millisecond, "the third caller is served once a connection closes")
	require.Equal(t, http.StatusNoContent, <-answered)
}
