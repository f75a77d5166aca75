package main

import (
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite the golden files of the tests")

// cannedAPI answers each "METHOD path" with a fixed JSON body (204 when it has
// none, 404 when the route is unknown) and records the requests it was sent.
type cannedAPI struct {
	answers map[string]string
	mu      sync.Mutex
	log     []string
}

func (a *cannedAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	route := r.Method + " " + r.URL.Path
	a.mu.Lock()
	a.log = append(a.log, strings.TrimSpace(route+" "+string(body)))
	a.mu.Unlock()
	answer, ok := a.answers[route]
	switch {
	case !ok:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"error":{"code":"not_found","message":"no route `+route+`"}}`)
	case answer == "":
		w.WriteHeader(http.StatusNoContent)
	default:
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, answer)
	}
}

// requests returns the requests recorded since the last call and forgets them.
func (a *cannedAPI) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := a.log
	a.log = nil
	return out
}

const cannedDeploymentID = "0b0e7c5e-2d43-4a55-9a53-6c2f3b1b2a11"

var cannedAnswers = map[string]string{
	"GET /api/v1/targets":          `{"targets":[{"id":"11111111-1111-1111-1111-111111111111","name":"web-1","mode":"poll","labels":{"env":"prod"}}]}`,
	"POST /api/v1/targets":         `{"id":"11111111-1111-1111-1111-111111111111","name":"web-1","mode":"listen","address":"10.0.0.1:7070","labels":{"env":"prod"}}`,
	"DELETE /api/v1/targets/web-1": "",
	"GET /api/v1/freezes": `{"freezes":[{"name":"weekend","selector":{"env":"prod","tier":"web"},"reason":"no weekend deploys",` +
		`"weekly":{"days":["sat","sun"],"from":"00:00","to":"00:00"},"active":true}]}`,
	"POST /api/v1/freezes":            `{"name":"weekend","selector":{"env":"prod"},"reason":"quiet","active":false}`,
	"DELETE /api/v1/freezes/weekend":  "",
	"GET /api/v1/limits":              `{"limits":[{"name":"prod-two","scope":"label","label":"env","value":"prod","max_running":2,"created_by":"admin"}]}`,
	"POST /api/v1/limits":             `{"name":"prod-two","scope":"label","label":"env","value":"prod","max_running":2}`,
	"DELETE /api/v1/limits/prod-two":  "",
	"GET /api/v1/schedules":           `{"schedules":[{"name":"nightly","cron":"0 3 * * *","deployment":"ship","next_runs":["2026-01-02T03:00:00Z"],"recent_runs":null}]}`,
	"POST /api/v1/schedules":          `{"name":"nightly","cron":"0 3 * * *","deployment":"ship","schedule_id":"mantis-nightly"}`,
	"DELETE /api/v1/schedules/ night": "",
	"GET /api/v1/webhooks":            `{"webhooks":[{"id":"22222222-2222-2222-2222-222222222222","url":"https://hooks.example/m","event_types":["deployment.*"],"created_by":"ops"}]}`,
	"POST /api/v1/webhooks":           `{"id":"22222222-2222-2222-2222-222222222222","url":"https://hooks.example/m","event_types":["deployment.*"]}`,
	"DELETE /api/v1/webhooks/22222222-2222-2222-2222-222222222222": "",
	"GET /api/v1/webhooks/22222222-2222-2222-2222-222222222222/failures": `{"deliveries":[{"id":1,"event_id":7,"event_type":"step.failed",` +
		`"status":"failed","attempts":11,"last_error":"503 Service Unavailable"}]}`,
	"GET /api/v1/deployments/" + cannedDeploymentID: `{"deployment":{"id":"` + cannedDeploymentID + `","name":"release","status":"failed","priority":"normal",` +
		`"steps":[{"name":"install","status":"failed","counts":{"succeeded":0,"failed":1},"targets":[{"target":"web-1","status":"failed","exit_code":3,"error":"exit 3","output_tail":"a\nb"}]}]}}`,
	"POST /api/v1/deployments/" + cannedDeploymentID + "/cancel": "",
}

// The commands that list, create, show and delete API objects print, in text and
// in each data format, what they printed before their code was shared, and send the
// same requests (testdata/api_commands.golden; go test -run TestAPICommandsOutput -update
// rewrites it).
func TestAPICommandsOutput(t *testing.T) {
	api := &cannedAPI{answers: cannedAnswers}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	spec := writeSpec(t, fleetSpec)
	commands := [][]string{
		{"targets"}, {"targets", "register", "web-1", "--mode", "listen", "--address", "10.0.0.1:7070", "--label", "env=prod"},
		{"targets", "deregister", "web-1"}, {"targets", "deregister", "web-2"},
		{"freeze", "list"}, {"freeze", "create", "weekend", "--reason", "quiet", "--selector", "env=prod"},
		{"freeze", "create", "weekend", "--reason", "quiet", "--selector", "env"}, {"freeze", "delete", "weekend"},
		{"limits", "list"}, {"limits", "set", "prod-two", "--scope", "label", "--label", "env", "--value", "prod", "--max-running", "2"},
		{"limits", "delete", "prod-two"}, {"limits", "delete", "missing"},
		{"schedule", "list"}, {"schedule", "create", "nightly", "--spec", spec, "--cron", "0 3 * * *"},
		{"schedule", "create", "nightly", "--spec", "no-such-spec.yaml", "--cron", "0 3 * * *"},
		{"schedule", "delete", " night"},
		{"webhook", "list"}, {"webhook", "create", "https://hooks.example/m", "--events", "deployment.*", "--secret", "0123456789abcdef"},
		{"webhook", "delete", "22222222-2222-2222-2222-222222222222"}, {"webhook", "failures", "22222222-2222-2222-2222-222222222222"},
		{"webhook", "failures", "33333333-3333-3333-3333-333333333333"},
		{"get", cannedDeploymentID}, {"get", "nope"}, {"cancel", cannedDeploymentID},
	}
	var transcript strings.Builder
	for _, format := range outputFormats {
		for _, args := range commands {
			all := append(append([]string(nil), args...), "-o", string(format))
			r := mantisctl(t, against(t, srv.URL, all...)...)
			fmt.Fprintf(&transcript, "$ mantisctl %s\nexit %d\n--- stdout\n%s--- stderr\n%s--- requests\n%s\n\n",
				strings.Join(all, " "), r.code, r.stdout, r.stderr, strings.Join(api.requests(), "\n"))
		}
	}
	empty := &cannedAPI{answers: map[string]string{"GET /api/v1/targets": "{}", "GET /api/v1/freezes": "{}", "GET /api/v1/limits": "{}",
		"GET /api/v1/schedules": "{}", "GET /api/v1/webhooks": "{}", "GET /api/v1/webhooks/w/failures": "{}"}}
	emptySrv := httptest.NewServer(empty)
	t.Cleanup(emptySrv.Close)
	for _, args := range [][]string{{"targets"}, {"freeze", "list"}, {"limits", "list"}, {"schedule", "list"}, {"webhook", "list"}, {"webhook", "failures", "w"}} {
		for _, format := range []string{"text", "json"} {
			all := append(append([]string(nil), args...), "-o", format)
			r := mantisctl(t, against(t, emptySrv.URL, all...)...)
			fmt.Fprintf(&transcript, "$ mantisctl %s (nothing listed)\nexit %d\n--- stdout\n%s--- stderr\n%s\n", strings.Join(all, " "), r.code, r.stdout, r.stderr)
		}
	}
	got := strings.ReplaceAll(transcript.String(), spec, "SPEC")
	golden := filepath.Join("testdata", "api_commands.golden")
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, []byte(got), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), got)
}
