package temporalclient_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	tlog "go.temporal.io/sdk/log"

	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/temporalclient"
)

// jsonLines are the JSON records in buf.
func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &rec), line)
		out = append(out, rec)
	}
	return out
}

// The SDK logs its errors under "Error" (and a few under "error"); the logger
// the client options carry writes them under err, as every Mantis line does.
func TestTemporalLoggerWritesErrorsUnderErr(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	opts, _, err := temporalclient.Options(config.Temporal{Address: "127.0.0.1:7233", Namespace: "default"}, logger)
	require.NoError(t, err)

	opts.Logger.Warn("Failed to send heartbeat", "Namespace", "default", "Error", errors.New("unavailable"))
	opts.Logger.Error("Error processing nexus task", "error", errors.New("refused"))
	tlog.With(opts.Logger, "Error", errors.New("bound")).Info("Task processing failed")
	opts.Logger.Info("Started Worker", "TaskQueue", "deployments")

	lines := jsonLines(t, &buf)
	require.Len(t, lines, 4)
	for i, want := range []string{"unavailable", "refused", "bound"} {
		require.Equal(t, want, lines[i]["err"], "line %d", i)
		require.NotContains(t, lines[i], "Error")
		require.NotContains(t, lines[i], "error")
	}
	require.Equal(t, "default", lines[0]["Namespace"], "other attributes are kept")
	require.Equal(t, "deployments", lines[3]["TaskQueue"])
	require.NotContains(t, lines[3], "err")
}
