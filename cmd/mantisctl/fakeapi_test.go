package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
)

// fakeAPI is a Mandible answering for one deployment: its state on GET, an event
// stream that sends events then holds the connection open, and creation on POST.
// It checks only what the tests need; the real API is tested against PostgreSQL.
type fakeAPI struct {
	mu         sync.Mutex
	deployment api.Deployment
	events     []events.Type
	// created records each POST /api/v1/deployments: its Idempotency-Key header and body.
	created []createCall
	// warnings are those of every create answer.
	warnings []api.FieldWarning
	// streaming is closed when the first event stream is asked for.
	streaming     chan struct{}
	streamingOnce sync.Once
}

type createCall struct {
	header string
	body   map[string]any
}

func newFakeAPI(t *testing.T, status string, evs ...events.Type) (*fakeAPI, string) {
	t.Helper()
	f := &fakeAPI{deployment: api.Deployment{ID: uuid.New(), Name: "release", Status: status, Priority: "normal",
		Steps: []api.Step{{Name: "install", Status: status, Targets: []api.TargetResult{{Target: "web-1", Status: "succeeded"}}}}},
		events: evs, streaming: make(chan struct{})}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	d := f.deployment
	f.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/api/v1/deployments":
		var body map[string]any
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		f.created = append(f.created, createCall{header: r.Header.Get(idempotencyHeader), body: body})
		f.mu.Unlock()
		api.WriteJSON(w, http.StatusAccepted, api.CreatedDeployment{ID: d.ID, Status: "pending", Created: true, Warnings: f.warnings})
	case r.URL.Path == "/api/v1/deployments":
		api.WriteJSON(w, http.StatusOK, api.DeploymentList{Deployments: []api.Deployment{d}})
	case r.URL.Path == "/api/v1/deployments/"+d.ID.String():
		api.WriteJSON(w, http.StatusOK, api.DeploymentAnswer{Deployment: d})
	case r.URL.Path == "/sse/deployments/"+d.ID.String():
		f.stream(w, r, d)
	default:
		api.WriteError(w, r, http.StatusNotFound, api.CodeNotFound, "no route "+r.URL.Path)
	}
}

// stream sends the events; the one that ends the deployment also settles its state.
// With no ending event it holds the stream open until the client leaves.
func (f *fakeAPI) stream(w http.ResponseWriter, r *http.Request, d api.Deployment) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	f.streamingOnce.Do(func() { close(f.streaming) })
	for i, typ := range f.events {
		if typ.IsDeployment() && terminal(typ.What()) {
			f.mu.Lock()
			f.deployment.Status = typ.What()
			f.mu.Unlock()
		}
		data, _ := json.Marshal(eventData(typ))
		fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", i+1, typ, data)
		w.(http.Flusher).Flush()
	}
	<-r.Context().Done()
}

// eventData is a plausible payload of typ for one step of one target.
func eventData(typ events.Type) any {
	pos := 0
	switch {
	case typ == events.StepStarted:
		return events.StepStartedData{Step: "install", StepPosition: 0, Targets: 1}
	case typ == events.TargetRunning:
		return events.TargetRunningData{StepPosition: &pos, Target: "web-1"}
	case typ == events.TargetSucceeded || typ == events.TargetFailed:
		return events.TargetEndedData{StepPosition: &pos, Target: "web-1"}
	case typ.IsStep():
		return events.StepEndedData{Step: "install", StepPosition: 0}
	}
	return events.DeploymentEndedData{Status: typ.What()}
}

func (f *fakeAPI) calls() []createCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]createCall(nil), f.created...)
}

// result is what one mantisctl invocation printed and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// mantisctl runs mantisctl in process as main does, with args, and returns what it
// printed and its exit code.
func mantisctl(t *testing.T, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	code := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
	return result{stdout: stdout.String(), stderr: stderr.String(), code: code}
}

// against is args with the flags that point mantisctl at url with the test token and
// no config file, put before a "--" so that they stay flags.
func against(t *testing.T, url string, args ...string) []string {
	t.Helper()
	flags := []string{"--server", url, "--token-file", tokenFile(t), "--client-config", ""}
	for i, a := range args {
		if a == "--" {
			return append(append(append([]string(nil), args[:i]...), flags...), args[i:]...)
		}
	}
	return append(args, flags...)
}

func requireCode(t *testing.T, want int, r result) {
	t.Helper()
	require.Equal(t, want, r.code, "stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
}
