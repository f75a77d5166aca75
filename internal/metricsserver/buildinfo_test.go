package metricsserver

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/version"
)

// The listener exports mantis_build_info labelled with the running build and answers
// /version with the same build.
func TestBuildInfoAndVersion(t *testing.T) {
	s, err := Listen("127.0.0.1:0", slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	go func() { _ = s.Run(t.Context()) }()
	base := "http://" + s.Addr().String()
	info := version.Get()

	body := get(t, base+MetricsPath)
	require.Contains(t, body, BuildInfoName+`{commit="`+info.Commit+`",go_version="`+info.GoVersion+`",version="`+info.Version+`"} 1`)

	var got version.Info
	require.NoError(t, json.Unmarshal([]byte(get(t, base+VersionPath)), &got))
	require.Equal(t, info, got)
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:noctx // a test's local listener
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return strings.TrimSpace(string(b))
}
