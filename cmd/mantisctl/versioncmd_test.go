package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/metricsserver"
	"github.com/mantis-deploy/mantis/internal/version"
)

// `mantisctl version` prints its own build and the server's, from the handler Mandible
// serves at /version; --client asks no server; a server that does not answer fails.
func TestVersionAsksTheServer(t *testing.T) {
	t.Parallel()
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+metricsserver.VersionPath, metricsserver.ServeVersion)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	build := version.Get().String()

	r := mantisctl(t, against(t, srv.URL, "version")...)
	requireCode(t, ExitOK, r)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Equal(t, []string{"mantisctl " + build, "mandible  " + build + " (" + srv.URL + ")"}, lines)

	r = mantisctl(t, against(t, srv.URL, "version", "-o", "json")...)
	requireCode(t, ExitOK, r)
	var report versionReport
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &report))
	require.Equal(t, version.Get(), report.Info)
	require.NotNil(t, report.Server)
	require.Equal(t, version.Get(), *report.Server)

	r = mantisctl(t, against(t, srv.URL, "version", "--client")...)
	requireCode(t, ExitOK, r)
	require.Equal(t, "mantisctl "+build, strings.TrimSpace(r.stdout))

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	r = mantisctl(t, against(t, gone.URL, "version")...)
	require.NotEqual(t, ExitOK, r.code)
	require.Contains(t, r.stdout, "mantisctl "+build)
	require.Contains(t, r.stderr, "asking the server for its version")
}
