package main

import (
	"context"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestProbeAcceptsOnlyA2xxAnswer(t *testing.T) {
	t.Parallel()
	status := http.StatusOK
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
	t.Cleanup(srv.Close)
	ctx := context.Background()

	require.NoError(t, probe(ctx, http.DefaultClient, srv.URL+"/healthz"))
	status = http.StatusServiceUnavailable
	require.ErrorContains(t, probe(ctx, http.DefaultClient, srv.URL+"/healthz"), "503")
	srv.Close()
	require.ErrorContains(t, probe(ctx, http.DefaultClient, srv.URL+"/healthz"), "probing")
}

func TestProbeVerifiesHTTPSAgainstTheGivenCA(t *testing.T) {
	t.Parallel()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	t.Cleanup(srv.Close)
	ctx := context.Background()

	require.ErrorContains(t, probe(ctx, http.DefaultClient, srv.URL), "certificate")
	caPath := filepath.Join(t.TempDir(), "ca.crt")
	block := &pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}
	require.NoError(t, os.WriteFile(caPath, pem.EncodeToMemory(block), 0o600))
	client, err := httpClient(caPath)
	require.NoError(t, err)
	require.NoError(t, probe(ctx, client, srv.URL))
}
