package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
)

func TestExitCodeOfMapsEachKindOfError(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		err     error
		started bool
		want    int
	}{
		"nil":                 {nil, true, ExitOK},
		"cobra usage":         {errors.New(`unknown flag: --bogus`), false, ExitUsage},
		"invalid input":       {invalidInput(errors.New("steps[0].command: required")), true, ExitUsage},
		"deployment failed":   {errDeploymentFailed, true, ExitFailed},
		"deployment cancel":   {fmt.Errorf("x: %w", errDeploymentCancelled), true, ExitCancelled},
		"interrupted":         {context.Canceled, true, ExitCancelled},
		"watch timeout":       {fmt.Errorf("watching: %w", errWatchTimedOut), true, ExitTimedOut},
		"HTTP 400":            {&apiclient.Error{Status: http.StatusBadRequest}, true, ExitUsage},
		"HTTP 404":            {&apiclient.Error{Status: http.StatusNotFound}, true, ExitUsage},
		"HTTP 401":            {&apiclient.Error{Status: http.StatusUnauthorized}, true, ExitAuth},
		"HTTP 403":            {fmt.Errorf("listing: %w", &apiclient.Error{Status: http.StatusForbidden}), true, ExitAuth},
		"HTTP 503":            {&apiclient.Error{Status: http.StatusServiceUnavailable}, true, ExitUnreachable},
		"HTTP 500":            {&apiclient.Error{Status: http.StatusInternalServerError}, true, ExitFailed},
		"DNS":                 {&net.DNSError{Err: "no such host", Name: "x.invalid"}, true, ExitUnreachable},
		"dev exec child":      {exitCode(42), true, 42},
		"anything else":       {errors.New("disk full"), true, ExitFailed},
		"usage before action": {&apiclient.Error{Status: http.StatusUnauthorized}, false, ExitUsage},
	} {
		require.Equal(t, tc.want, exitCodeOf(tc.err, tc.started), name)
	}
}

// `mantisctl --help` documents every exit code.
func TestHelpDocumentsExitCodes(t *testing.T) {
	t.Parallel()
	r := mantisctl(t, "--help")
	requireCode(t, ExitOK, r)
	for _, line := range []string{"Exit codes:", "0  succeeded", "1  the deployment failed", "2  usage error", "3  the deployment was cancelled",
		"4  authentication", "5  server unreachable", "6  timed out waiting", "GITHUB_RUN_ID", "CI_PIPELINE_ID", "BUILD_TAG", "BUILDKITE_BUILD_ID"} {
		require.Contains(t, r.stdout, line)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"bogus"},
		{"list", "--bogus"},
		{"get"},
		{"get", "a", "b"},
		{"dlq", "requeue"},
		{"list", "-o", "xml"},
		{"dlq", "requeue", "--to", "urgent"},
		{"deploy", "-f", "/nonexistent/spec.yaml"},
		{"run", "--targets", "web-1", "--priority", "urgent", "--", "true"},
	} {
		r := mantisctl(t, against(t, "http://127.0.0.1:1", args...)...)
		requireCode(t, ExitUsage, r)
		require.NotEmpty(t, r.stderr, "%v says why", args)
	}
}

// An HTTP 400 from the real API (a limit out of range) exits 2; a token the API does
// not know exits 4.
func TestAPIRefusalsExitWithTheirCodes(t *testing.T) {
	url := apiServer(t)
	r := mantisctl(t, against(t, url, "requests", "--limit", "100000")...)
	requireCode(t, ExitUsage, r)
	require.Contains(t, r.stderr, "HTTP 400")

	r = mantisctl(t, "requests", "--server", url, "--token-file", writeToken(t, "not-a-known-token-0123456789"), "--client-config", "")
	requireCode(t, ExitAuth, r)
	require.Contains(t, r.stderr, "HTTP 401")
}

func TestForbiddenExits4(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		api.WriteError(w, r, http.StatusForbidden, api.CodeForbidden, "token scope read does not cover deploy")
	}))
	t.Cleanup(srv.Close)
	requireCode(t, ExitAuth, mantisctl(t, against(t, srv.URL, "cancel", "0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8e")...))
}

func TestUnreachableServerExits5(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	refused := "http://" + l.Addr().String()
	require.NoError(t, l.Close())
	r := mantisctl(t, against(t, refused, "list")...)
	requireCode(t, ExitUnreachable, r)
	require.Contains(t, r.stderr, "connection refused")

	tlsSrv := httptest.NewUnstartedServer(http.NotFoundHandler())
	tlsSrv.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshake is the point
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	r = mantisctl(t, against(t, tlsSrv.URL, "list")...)
	requireCode(t, ExitUnreachable, r)
	require.Contains(t, r.stderr, "certificate")

	r = mantisctl(t, against(t, "http://mandible.invalid:8080", "list")...)
	requireCode(t, ExitUnreachable, r)
}

func TestWatchExitsByTheDeploymentsEnd(t *testing.T) {
	t.Parallel()
	for status, want := range map[string]int{"succeeded": ExitOK, "failed": ExitFailed, "cancelled": ExitCancelled} {
		fake, url := newFakeAPI(t, "running", events.StepStarted, events.TargetRunning, events.TargetSucceeded, events.Type(events.DeploymentPrefix+status))
		r := mantisctl(t, against(t, url, "watch", fake.deployment.ID.String())...)
		requireCode(t, want, r)
		require.Contains(t, r.stdout, "deployment release "+map[string]string{"succeeded": "SUCCEEDED", "failed": "FAILED", "cancelled": "CANCELLED"}[status])

		// get shows a deployment that ended, whichever way, and succeeds.
		r = mantisctl(t, against(t, url, "get", fake.deployment.ID.String())...)
		requireCode(t, ExitOK, r)
	}
	// An id the server does not know is invalid input.
	_, url := newFakeAPI(t, "running")
	requireCode(t, ExitUsage, mantisctl(t, against(t, url, "watch", "0190b3c4-1c5e-7d2a-9b1e-3f4a5b6c7d8e")...))
}

func TestWatchTimeoutExits6(t *testing.T) {
	t.Parallel()
	fake, url := newFakeAPI(t, "running", events.StepStarted) // never ends
	start := time.Now()
	r := mantisctl(t, against(t, url, "watch", fake.deployment.ID.String(), "--timeout", "300ms")...)
	requireCode(t, ExitTimedOut, r)
	require.Contains(t, r.stderr, "timed out")
	require.Less(t, time.Since(start), 30*time.Second)
}

func writeToken(t *testing.T, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(token), 0o600))
	return path
}

// Interrupting mantisctl (SIGINT cancels its context) while it watches exits 3.
func TestInterruptedWatchExits3(t *testing.T) {
	t.Parallel()
	fake, url := newFakeAPI(t, "running", events.StepStarted) // never ends
	ctx, interrupt := context.WithCancel(context.Background())
	defer interrupt()
	code := make(chan int, 1)
	var stdout, stderr bytes.Buffer
	args := against(t, url, "watch", fake.deployment.ID.String())
	go func() { code <- run(ctx, args, strings.NewReader(""), &stdout, &stderr) }()
	select {
	case <-fake.streaming:
	case <-time.After(30 * time.Second):
		t.Fatal("watch never asked for the event stream")
	}
	interrupt()
	select {
	case got := <-code:
		require.Equal(t, ExitCancelled, got, stderr.String())
		require.Contains(t, stderr.String(), "interrupted")
	case <-time.After(30 * time.Second):
		t.Fatal("watch did not stop when interrupted")
	}
}
