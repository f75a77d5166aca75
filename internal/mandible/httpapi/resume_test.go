package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/converter"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/schema"
	"github.com/mantis-deploy/mantis/workflows"
)

// resumeTargets are the targets of the ended deployment the resume tests start from,
// in deployment order; failedOnStep1 are those its step 1 failed on.
var (
	resumeTargets = []string{"app-01", "app-02", "app-03", "app-04", "app-05"}
	failedOnStep1 = []string{"app-02", "app-04", "app-05"}
)

// endedDeployment records a three-step deployment on resumeTargets that ended in
// status: step 0 succeeded on every target, step 1 failed on failedOnStep1 (their
// requests failed) and succeeded on the others, step 2 was skipped.
func endedDeployment(t *testing.T, b *fleetBundle, status string) uuid.UUID {
	t.Helper()
	return recordEndedDeployment(t, b.pool, status)
}

// recordEndedDeployment registers resumeTargets and records the deployment
// endedDeployment describes.
func recordEndedDeployment(t *testing.T, pool *pgxpool.Pool, status string) uuid.UUID {
	t.Helper()
	ctx := context.Background()
	for _, name := range resumeTargets {
		_, err := schema.RegisterTarget(ctx, pool, schema.NewTarget{Name: name, Mode: schema.ModePoll}, time.Hour)
		require.NoError(t, err)
	}
	d := fmt.Sprintf(`{"name":"release-7","priority":"high","max_parallel":2,"targets":[%q,%q,%q,%q,%q],"steps":[
		{"name":"fetch","command":"echo fetch"},{"name":"install","command":"./install.sh","env":{"RELEASE":"7"}},
		{"name":"restart","command":"echo restart"}]}`, resumeTargets[0], resumeTargets[1], resumeTargets[2], resumeTargets[3], resumeTargets[4])
	id := uuid.New()
	_, _, err := schema.CreateDeployment(ctx, pool, schema.NewDeployment{ID: id, Name: "release-7", Priority: "high", Spec: json.RawMessage(d), MaxParallel: 2})
	require.NoError(t, err)
	steps := []schema.StepRecord{{Name: "fetch", Command: "echo fetch"}, {Name: "install", Command: "./install.sh"}, {Name: "restart", Command: "echo restart"}}
	for i := range steps {
		steps[i].Timeout = 600e9
	}
	require.NoError(t, schema.StartDeployment(ctx, pool, id, steps, resumeTargets))
	for pos := range 2 {
		var reqs []schema.NewDispatchRequest
		for _, name := range resumeTargets {
			p := pos
			reqs = append(reqs, schema.NewDispatchRequest{IdempotencyKey: fmt.Sprintf("%s-%d-%s", id, pos, name), Target: name,
				DeploymentID: &id, StepPosition: &p, Command: "x", Priority: "high"})
		}
		_, err := schema.EnqueueDispatchRequests(ctx, pool, reqs)
		require.NoError(t, err)
	}
	_, err = pool.Exec(ctx, `UPDATE pending_dispatch_requests p SET status = 'failed'
		FROM targets t WHERE t.id = p.target_id AND p.deployment_id = $1 AND p.step_position = 1 AND t.name = ANY($2)`, id, failedOnStep1)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE deployment_steps SET status = (ARRAY['succeeded','failed','skipped'])[position + 1] WHERE deployment_id = $1`, id)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE deployments SET status = $2, finished_at = now() WHERE id = $1`, id, status)
	require.NoError(t, err)
	return id
}

// A failed deployment resumed with no body runs from its first step that did not
// succeed, on the targets that step failed on (in deployment order, a deregistered
// one left out and named), with the old spec's other fields; the new deployment is
// linked in its row, its GET, its workflow's memo and the old deployment's events.
func TestResumeCreatesALinkedDeploymentOnTheFailedTargets(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	old := endedDeployment(t, b, domain.DeploymentFailed)
	_, err := b.pool.Exec(context.Background(), `UPDATE targets SET deregistered_at = now() WHERE name = 'app-05'`)
	require.NoError(t, err)

	var got api.ResumedDeployment
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/deployments/"+old.String()+"/resume", fleetDeploy, "", &got))
	require.True(t, got.Created)
	require.Equal(t, old, got.ResumedFrom)
	require.Equal(t, api.RelationResume, got.Relation)
	require.NotNil(t, got.FromStep)
	require.Equal(t, 1, *got.FromStep, "the first step that did not succeed")
	require.Equal(t, []string{"app-02", "app-04"}, got.Targets)
	require.Equal(t, []string{"app-05"}, got.LeftOut)

	var view api.DeploymentAnswer
	require.Equal(t, http.StatusOK, b.call(t, "GET", "/api/v1/deployments/"+got.ID.String(), fleetRead, "", &view))
	require.Equal(t, &old, view.Deployment.PreviousDeploymentID)
	require.Equal(t, api.RelationResume, *view.Deployment.Relation)
	require.Equal(t, 1, *view.Deployment.FromStep)
	var d struct {
		Name           string            `json:"name"`
		Priority       string            `json:"priority"`
		MaxParallel    int               `json:"max_parallel"`
		Targets        []string          `json:"targets"`
		TargetSelector map[string]string `json:"target_selector"`
		Steps          []struct {
			Name string            `json:"name"`
			Env  map[string]string `json:"env"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal(view.Deployment.Spec, &d))
	require.Equal(t, "release-7", d.Name)
	require.Equal(t, "high", d.Priority)
	require.Equal(t, 2, d.MaxParallel)
	require.Equal(t, []string{"app-02", "app-04"}, d.Targets)
	require.Len(t, d.Steps, 2)
	require.Equal(t, "install", d.Steps[0].Name)
	require.Equal(t, "7", d.Steps[0].Env["RELEASE"])
	require.Equal(t, "restart", d.Steps[1].Name)

	var oldView api.DeploymentAnswer
	require.Equal(t, http.StatusOK, b.call(t, "GET", "/api/v1/deployments/"+old.String(), fleetRead, "", &oldView))
	require.Nil(t, oldView.Deployment.PreviousDeploymentID, "the old deployment is made from none")

	var data []byte
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT data FROM deployment_events WHERE deployment_id = $1 AND type = $2`,
		old, string(events.DeploymentResumedAs)).Scan(&data))
	var ev events.RelatedDeploymentData
	require.NoError(t, json.Unmarshal(data, &ev))
	require.Equal(t, got.ID.String(), ev.NewDeploymentID)
	require.Equal(t, "ci", ev.Actor)

	memo := workflowMemo(t, b, got.ID)
	require.Equal(t, old.String(), memo[httpapi.MemoPreviousDeployment])
	require.Equal(t, schema.RelationResume, memo[httpapi.MemoRelation])
	require.EqualValues(t, 1, memo[httpapi.MemoFromStep])
	require.Equal(t, "ci", memo[httpapi.MemoCreatedBy])
}

// workflowMemo reads the memo of deployment id's workflow.
func workflowMemo(t *testing.T, b *fleetBundle, id uuid.UUID) map[string]any {
	t.Helper()
	desc, err := rawDescription(b.temporal.DescribeWorkflow(context.Background(), workflows.DeploymentWorkflowID(id.String()), ""))
	require.NoError(t, err)
	out := map[string]any{}
	for k, p := range desc.WorkflowExecutionInfo.GetMemo().GetFields() {
		var v any
		require.NoError(t, converter.GetDefaultDataConverter().FromPayload(p, &v))
		out[k] = v
	}
	return out
}

// A resume with failed_only false runs on every recorded target from the step
// asked; the same Idempotency-Key answers the same deployment with 200.
func TestResumeOnAllTargetsFromAStepIsIdempotent(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	old := endedDeployment(t, b, domain.DeploymentCancelled)
	body := `{"from_step":2,"failed_only":false}`
	first := resumeWithKey(t, b, old, body, "resume-key-1", http.StatusAccepted)
	require.Equal(t, resumeTargets, first.Targets)
	require.Equal(t, 2, *first.FromStep)
	again := resumeWithKey(t, b, old, body, "resume-key-1", http.StatusOK)
	require.Equal(t, first.ID, again.ID)
	require.False(t, again.Created)
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM deployments WHERE previous_deployment_id = $1`, old).Scan(&n))
	require.Equal(t, 1, n)
}

// resumeWithKey resumes old with body and an Idempotency-Key, expecting status want.
func resumeWithKey(t *testing.T, b *fleetBundle, old uuid.UUID, body, key string, want int) api.ResumedDeployment {
	t.Helper()
	req, err := http.NewRequest("POST", b.srv.URL+"/api/v1/deployments/"+old.String()+"/resume", strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fleetDeploy)
	req.Header.Set(api.IdempotencyKeyHeader, key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var out api.ResumedDeployment
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
	require.Equal(t, want, resp.StatusCode)
	return out
}

// Resume and re-run refuse what they cannot do, naming it: a deployment still
// running (409 with its status), a step out of range, a step that failed on no
// target, an unknown deployment, a read token, a body that is not the request.
func TestResumeAndRerunRefusals(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	old := endedDeployment(t, b, domain.DeploymentFailed)
	running := uuid.New()
	_, _, err := schema.CreateDeployment(context.Background(), b.pool, schema.NewDeployment{ID: running, Name: "busy", Priority: "normal",
		Spec: json.RawMessage(`{"name":"busy","targets":["app-01"],"steps":[{"name":"s","command":"true"}]}`)})
	require.NoError(t, err)
	_, err = b.pool.Exec(context.Background(), `UPDATE deployments SET status = 'running' WHERE id = $1`, running)
	require.NoError(t, err)
	path := func(id uuid.UUID, what string) string { return "/api/v1/deployments/" + id.String() + "/" + what }
	cases := []struct {
		name, path, token, body string
		status                  int
		code                    api.ErrorCode
		detail                  string
	}{
		{"resume running", path(running, "resume"), fleetDeploy, "", http.StatusConflict, api.CodeInvalidState, "is running"},
		{"rerun running", path(running, "rerun"), fleetDeploy, "", http.StatusConflict, api.CodeInvalidState, "is running"},
		{"from_step too far", path(old, "resume"), fleetDeploy, `{"from_step":3}`, http.StatusBadRequest, api.CodeInvalidArgument, "from_step 3 is out of range"},
		{"from_step negative", path(old, "resume"), fleetDeploy, `{"from_step":-1}`, http.StatusBadRequest, api.CodeInvalidArgument, "from_step -1 is out of range"},
		{"nothing failed", path(old, "resume"), fleetDeploy, `{"from_step":0}`, http.StatusBadRequest, api.CodeInvalidArgument, "step 0 (fetch)"},
		{"unknown field", path(old, "resume"), fleetDeploy, `{"from":1}`, http.StatusBadRequest, api.CodeInvalidJSON, "from_step and failed_only"},
		{"too large", path(old, "resume"), fleetDeploy, `{"from_step":1` + strings.Repeat(" ", api.MaxResumeBody) + `}`, http.StatusRequestEntityTooLarge, api.CodeTooLarge, "exceeds"},
		{"unknown resume", path(uuid.New(), "resume"), fleetDeploy, "", http.StatusNotFound, api.CodeNotFound, "no deployment"},
		{"unknown rerun", path(uuid.New(), "rerun"), fleetDeploy, "", http.StatusNotFound, api.CodeNotFound, "no deployment"},
		{"read token resume", path(old, "resume"), fleetRead, "", http.StatusForbidden, api.CodeForbidden, "needs scope deploy"},
		{"read token rerun", path(old, "rerun"), fleetRead, "", http.StatusForbidden, api.CodeForbidden, "needs scope deploy"},
	}
	for _, c := range cases {
		var problem map[string]any
		require.Equal(t, c.status, b.call(t, "POST", c.path, c.token, c.body, &problem), "%s: %v", c.name, problem)
		require.Equal(t, string(c.code), problem["code"], c.name)
		require.Contains(t, problem["detail"], c.detail, c.name)
	}
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM deployments WHERE previous_deployment_id IS NOT NULL`).Scan(&n))
	require.Zero(t, n, "no refusal created a deployment")
}

// A re-run of a deployment that ended creates a new one from the same stored spec,
// on every target again, linked as a re-run.
func TestRerunCreatesTheSameSpecAgain(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	old := endedDeployment(t, b, domain.DeploymentFailed)
	var got api.ResumedDeployment
	require.Equal(t, http.StatusAccepted, b.call(t, "POST", "/api/v1/deployments/"+old.String()+"/rerun", fleetDeploy, "", &got))
	require.Equal(t, api.RelationRerun, got.Relation)
	require.Nil(t, got.FromStep)
	var view, oldView api.DeploymentAnswer
	require.Equal(t, http.StatusOK, b.call(t, "GET", "/api/v1/deployments/"+got.ID.String(), fleetRead, "", &view))
	require.Equal(t, http.StatusOK, b.call(t, "GET", "/api/v1/deployments/"+old.String(), fleetRead, "", &oldView))
	require.Equal(t, api.RelationRerun, *view.Deployment.Relation)
	require.Nil(t, view.Deployment.FromStep)
	var was, now spec.Deployment
	require.NoError(t, json.Unmarshal(oldView.Deployment.Spec, &was))
	require.NoError(t, json.Unmarshal(view.Deployment.Spec, &now))
	require.Equal(t, was.WithDefaults(), now.WithDefaults(), "the same spec")
	memo := workflowMemo(t, b, got.ID)
	require.Equal(t, schema.RelationRerun, memo[httpapi.MemoRelation])
	require.NotContains(t, memo, httpapi.MemoFromStep)
	var typ string
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT type FROM deployment_events WHERE deployment_id = $1 AND data->>'new_deployment_id' = $2`,
		old, got.ID.String()).Scan(&typ))
	require.Equal(t, string(events.DeploymentRerunAs), typ)
}
