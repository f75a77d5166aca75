package schema_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// A retry runs the step again on the targets it failed on only, as new requests:
// the step counts the retries, not the superseded failures, and a repeated retry of
// the same round changes nothing.
func TestRetryStepRunsOnlyTheFailedTargetsAgain(t *testing.T) {
	t.Parallel()
	w := setupWindow(t, 4, 0, false)
	_, err := schema.AdvanceStep(w.ctx, w.pool, w.id, 0)
	require.NoError(t, err)
	w.finish(t, "web-00002")
	p, err := schema.AdvanceStep(w.ctx, w.pool, w.id, 0)
	require.NoError(t, err)
	require.Equal(t, domain.StepFailed, p.Status)
	require.Equal(t, 1, p.Failed)

	n, err := schema.RetryStep(w.ctx, w.pool, w.id, 0, 1)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	again, err := schema.RetryStep(w.ctx, w.pool, w.id, 0, 1)
	require.NoError(t, err)
	require.Zero(t, again, "the same round twice retries once")

	p, err = schema.AdvanceStep(w.ctx, w.pool, w.id, 0)
	require.NoError(t, err)
	require.False(t, p.Done)
	require.Equal(t, domain.StepProgress{Total: 4, Enqueued: 4, Succeeded: 3, Running: 1}, p, "the retried target runs; the failure is superseded")
	var requests []string
	rows, err := w.pool.Query(w.ctx, `SELECT t.name FROM pending_dispatch_requests p JOIN targets t ON t.id = p.target_id
		WHERE p.deployment_id = $1 ORDER BY p.created_at, t.name`, w.id)
	require.NoError(t, err)
	for rows.Next() {
		var name string
		require.NoError(t, rows.Scan(&name))
		requests = append(requests, name)
	}
	require.NoError(t, rows.Err())
	require.Equal(t, []string{"web-00001", "web-00002", "web-00003", "web-00004", "web-00002"}, requests, "only the failed target gets a new request")

	w.finish(t)
	p, err = schema.AdvanceStep(w.ctx, w.pool, w.id, 0)
	require.NoError(t, err)
	require.Equal(t, domain.StepSucceeded, p.Status)
	require.Equal(t, 4, p.Succeeded)
}

// A decision is recorded once per Update id, with its event, and clears the wait.
func TestRecordDecisionOncePerUpdate(t *testing.T) {
	t.Parallel()
	w := setupWindow(t, 1, 0, false)
	since := time.Now().UTC().Truncate(time.Millisecond)
	require.NoError(t, schema.SetWaiting(w.ctx, w.pool, w.id, &events.WaitingData{Kind: events.WaitApproval, Approvers: []string{"alice"}, Since: since}))
	waiting, err := schema.DeploymentWaitingFor(w.ctx, w.pool, w.id)
	require.NoError(t, err)
	require.Equal(t, &schema.Waiting{Kind: events.WaitApproval, Approvers: []string{"alice"}, Since: since}, waiting)

	step := 0
	d := schema.NewDecision{DeploymentID: w.id, Decision: domain.DecisionApprove, By: "alice", Comment: "ok", Step: &step, At: since, UpdateID: "u-1"}
	first, err := schema.RecordDecision(w.ctx, w.pool, d)
	require.NoError(t, err)
	d.Comment = "a retried activity"
	second, err := schema.RecordDecision(w.ctx, w.pool, d)
	require.NoError(t, err)
	require.Equal(t, first, second, "the retry returns the stored decision")
	list, err := schema.Decisions(w.ctx, w.pool, w.id)
	require.NoError(t, err)
	require.Equal(t, []domain.Decision{{Decision: "approve", By: "alice", At: first.At, Step: &step, Comment: "ok"}}, list)
	waiting, err = schema.DeploymentWaitingFor(w.ctx, w.pool, w.id)
	require.NoError(t, err)
	require.Nil(t, waiting)
	var decided int
	require.NoError(t, w.pool.QueryRow(w.ctx, `SELECT count(*) FROM deployment_events WHERE deployment_id = $1 AND type = $2`,
		w.id, string(events.DeploymentDecided)).Scan(&decided))
	require.Equal(t, 1, decided)
}
