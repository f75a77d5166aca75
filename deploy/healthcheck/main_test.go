package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProbeAcceptsOnlyA2xxAnswer(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	t.Cleanup(srv.Close)

	require.NoError(t, probe(context.Background(), srv.URL+"/healthz"))
	status = http.StatusServiceUnavailable
	require.ErrorContains(t, probe(context.Background(), srv.URL+"/healthz"), "503")
	srv.Close()
	require.ErrorContains(t, probe(context.Background(), srv.URL+"/healthz"), "probing")
}
