package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// resumeStub answers GET of one deployment in a status and records the POSTs made
// to it, answering a resume or re-run with a new deployment and a decision with its
// record. The real routes are tested in internal/mandible/httpapi and internal/testrig/e2e.
type resumeStub struct {
	status string
	newID  uuid.UUID
	mu     sync.Mutex
	posts  map[string]map[string]any
}

func (s *resumeStub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := "0193a5d0-0000-7000-8000-000000000001"
	base := "/api/v1/deployments/" + id
	if r.Method == http.MethodGet && r.URL.Path == base {
		api.WriteJSON(w, http.StatusOK, api.DeploymentAnswer{Deployment: api.Deployment{ID: uuid.MustParse(id), Name: "release", Status: s.status}})
		return
	}
	raw, _ := io.ReadAll(r.Body)
	body := map[string]any{}
	_ = json.Unmarshal(raw, &body)
	s.mu.Lock()
	s.posts[r.URL.Path] = body
	s.mu.Unlock()
	switch r.URL.Path {
	case base + "/resume", base + "/rerun":
		from := 1
		answer := api.ResumedDeployment{ID: s.newID, Status: "pending", Created: true, Relation: api.RelationResume,
			ResumedFrom: uuid.MustParse(id), FromStep: &from, Targets: []string{"web-2"}, LeftOut: []string{"web-9"}}
		api.WriteJSON(w, http.StatusAccepted, answer)
	case base + "/decisions":
		api.WriteJSON(w, http.StatusOK, api.Decision{Decision: api.DecisionResume, By: "ci"})
	default:
		http.NotFound(w, r)
	}
}

func runResumeStub(t *testing.T, status string, args ...string) (*resumeStub, string, error) {
	t.Helper()
	stub := &resumeStub{status: status, newID: uuid.New(), posts: map[string]map[string]any{}}
	srv := httptest.NewServer(stub)
	t.Cleanup(srv.Close)
	out, err := runCLI(t, append(args, "--server", srv.URL, "--token-file", tokenFile(t), "--client-config", "")...)
	return stub, out, err
}

// mantisctl resume of a deployment that failed creates a new deployment through the
// resume route with the flags as its body; of a running one it sends the resume
// decision, and refuses the flags that only make sense for one that ended.
func TestResumeCommandPicksTheMeaningFromTheStatus(t *testing.T) {
	t.Parallel()
	const id = "0193a5d0-0000-7000-8000-000000000001"
	stub, out, err := runResumeStub(t, "failed", "resume", id, "--from-step", "2", "--all-targets")
	require.NoError(t, err, out)
	require.Equal(t, map[string]any{"from_step": float64(2), "failed_only": false}, stub.posts["/api/v1/deployments/"+id+"/resume"])
	require.Contains(t, out, "deployment "+stub.newID.String()+" created: resumes "+id+" from step 1 on 1 targets")
	require.Contains(t, out, "left out (no longer registered): web-9")

	stub, out, err = runResumeStub(t, "cancelled", "resume", id)
	require.NoError(t, err, out)
	require.Equal(t, map[string]any{}, stub.posts["/api/v1/deployments/"+id+"/resume"], "the server's defaults: first step not succeeded, failed targets")

	stub, out, err = runResumeStub(t, "running", "resume", id, "--comment", "go on")
	require.NoError(t, err, out)
	require.Equal(t, map[string]any{"decision": "resume", "comment": "go on"}, stub.posts["/api/v1/deployments/"+id+"/decisions"])
	require.NotContains(t, stub.posts, "/api/v1/deployments/"+id+"/resume")

	stub, out, err = runResumeStub(t, "running", "resume", id, "--all-targets")
	require.Error(t, err)
	require.Contains(t, err.Error(), "is running")
	require.Empty(t, stub.posts, out)

	stub, out, err = runResumeStub(t, "succeeded", "rerun", id)
	require.NoError(t, err, out)
	require.Contains(t, stub.posts, "/api/v1/deployments/"+id+"/rerun")
	require.Contains(t, out, stub.newID.String())

	out, err = runCLI(t, "resume", "--help")
	require.NoError(t, err)
	require.Contains(t, out, "running (paused)")
	require.Contains(t, out, "failed or cancelled")
}
