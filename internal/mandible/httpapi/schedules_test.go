package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/workflows"
)

// A schedule created through the API is a Temporal Schedule that fires on the real
// server, starting the Deployment workflow with the spec on the deployment task
// queue; it is listed with its runs and deleted with its Temporal Schedule.
func TestScheduleFiresDeploymentWorkflow(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	b.registerTargets(t, map[string]string{"web-1": "prod"})
	// Schedules live in the Temporal namespace every package's tests share: a name of
	// its own keeps another test's schedule out of this one.
	name := "nightly-" + uuid.NewString()[:8]
	body := `{"name":"` + name + `","every":"2s","spec":{"name":"nightly-ship","targets":["web-1"],"steps":[{"name":"s","command":"true"}]}}`
	require.Equal(t, http.StatusForbidden, b.call(t, "POST", "/api/v1/schedules", fleetDeploy, body, nil))
	var created api.Schedule
	require.Equal(t, http.StatusCreated, b.call(t, "POST", "/api/v1/schedules", fleetAdmin, body, &created))
	require.Equal(t, "2s", created.Every)
	require.Equal(t, "nightly-ship", created.Deployment)
	require.Equal(t, http.StatusConflict, b.call(t, "POST", "/api/v1/schedules", fleetAdmin, body, nil))
	t.Cleanup(func() {
		_ = b.temporal.ScheduleClient().GetHandle(context.Background(), httpapi.ScheduleID(name)).Delete(context.Background())
	})

	var fired api.Schedule
	require.Eventually(t, func() bool {
		var list api.ScheduleList
		require.Equal(t, http.StatusOK, b.call(t, "GET", "/api/v1/schedules", fleetRead, "", &list))
		require.Len(t, list.Schedules, 1)
		fired = list.Schedules[0]
		return len(fired.RecentRuns) > 0
	}, 60*time.Second, 500*time.Millisecond, "the schedule never fired")

	desc, err := b.temporal.ScheduleClient().GetHandle(context.Background(), httpapi.ScheduleID(name)).Describe(context.Background())
	require.NoError(t, err)
	run := desc.Info.RecentActions[0].StartWorkflowResult
	require.True(t, strings.HasPrefix(run.WorkflowID, httpapi.ScheduledWorkflowPrefix+name), run.WorkflowID)
	wf, err := b.temporal.DescribeWorkflow(context.Background(), run.WorkflowID, run.FirstExecutionRunID)
	require.NoError(t, err)
	info := wf.RawResponse.GetWorkflowExecutionInfo()
	require.Equal(t, workflows.DeploymentWorkflowType, info.GetType().GetName())
	require.Equal(t, b.tsrv.TaskQueue, info.GetTaskQueue())

	require.Equal(t, http.StatusNoContent, b.call(t, "DELETE", "/api/v1/schedules/"+name, fleetAdmin, "", nil))
	require.Equal(t, http.StatusNotFound, b.call(t, "DELETE", "/api/v1/schedules/"+name, fleetAdmin, "", nil))
	_, err = b.temporal.ScheduleClient().GetHandle(context.Background(), httpapi.ScheduleID(name)).Describe(context.Background())
	require.Error(t, err, "the Temporal Schedule is gone")
}

// A schedule needs exactly one of cron and every, a valid cron expression, and a
// spec without idempotency key or secrets; each refusal names its field.
func TestScheduleRefusals(t *testing.T) {
	t.Parallel()
	b := setupFleet(t)
	b.registerTargets(t, map[string]string{"web-1": "prod"})
	okSpec := `{"name":"d","targets":["web-1"],"steps":[{"name":"s","command":"true"}]}`
	for body, field := range map[string]string{
		`{"name":"a","spec":` + okSpec + `}`:                                                                                               "cron",
		`{"name":"a","cron":"0 3 * * *","every":"1h","spec":` + okSpec + `}`:                                                               "cron",
		`{"name":"a","every":"10ms","spec":` + okSpec + `}`:                                                                                "every",
		`{"name":"bad name","every":"1h","spec":` + okSpec + `}`:                                                                           "name",
		`{"name":"a","cron":"not a cron","spec":` + okSpec + `}`:                                                                           "cron",
		`{"name":"a","every":"1h","spec":{"name":"d","idempotency_key":"k","targets":["web-1"],"steps":[{"name":"s","command":"true"}]}}`:  "spec.idempotency_key",
		`{"name":"a","every":"1h","spec":{"name":"d","targets":["web-1"],"steps":[{"name":"s","command":"true","env_secret":{"K":"v"}}]}}`: "spec.steps[0].env_secret",
		`{"name":"a","every":"1h","spec":{"name":"d","targets":["ghost"],"steps":[{"name":"s","command":"true"}]}}`:                        "targets[0]",
	} {
		var p api.Problem
		require.Equal(t, http.StatusBadRequest, b.call(t, "POST", "/api/v1/schedules", fleetAdmin, body, &p), body)
		require.NotEmpty(t, p.Fields, body)
		require.Equal(t, field, p.Fields[0].Field, body)
	}
	var list api.ScheduleList
	require.Equal(t, http.StatusOK, b.call(t, "GET", "/api/v1/schedules", fleetRead, "", &list))
	require.Empty(t, list.Schedules, "a refused schedule leaves no row")
}
