package schema_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// addLabelledTargets registers n poll targets labelled role=web in one statement.
func (b dispatchBundle) addLabelledTargets(t *testing.T, prefix string, n int) {
	t.Helper()
	_, err := b.pool.Exec(b.ctx, `
		INSERT INTO targets (name, mode, labels, assigned_instance_id)
		SELECT $1 || lpad(i::text, 5, '0'), 'poll', '{"role": "web"}'::jsonb, $3
		FROM generate_series(1, $2) AS i`, prefix, n, b.instance)
	require.NoError(t, err)
}

func TestResolveTargetsRefusesMoreThanMaxTargets(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t)
	b.addLabelledTargets(t, "web-", spec.MaxTargets)

	got, err := schema.ResolveTargets(b.ctx, b.pool, nil, map[string]string{"role": "web"})
	require.NoError(t, err)
	require.Len(t, got, spec.MaxTargets, "exactly the cap is allowed")

	b.addLabelledTargets(t, "api-", 2345)
	_, err = schema.ResolveTargets(b.ctx, b.pool, []string{"web-00001"}, map[string]string{"role": "web"})
	var inputErr *domain.InputError
	require.True(t, errors.As(err, &inputErr), "got %v", err)
	require.Equal(t, domain.Problems{{Field: "target_selector", Problem: "deployment resolves to 12345 targets; at most 10000"}}, inputErr.Problems)
}

// windowBundle is a started deployment of one step over n targets.
type windowBundle struct {
	dispatchBundle
	id uuid.UUID
}

func setupWindow(t *testing.T, n, maxParallel int, continueOnError bool) windowBundle {
	t.Helper()
	b := setupDispatch(t)
	b.addLabelledTargets(t, "web-", n)
	id := uuid.New()
	_, _, err := schema.CreateDeployment(b.ctx, b.pool, schema.NewDeployment{
		ID: id, Name: "window", Priority: "normal", MaxParallel: maxParallel,
		Spec: []byte(`{"steps":[{"name":"s0","command":"true","env":{"A":"1"},"working_dir":"/srv"}]}`),
	})
	require.NoError(t, err)
	targets, err := schema.ResolveTargets(b.ctx, b.pool, nil, map[string]string{"role": "web"})
	require.NoError(t, err)
	require.NoError(t, schema.StartDeployment(b.ctx, b.pool, id, []schema.StepRecord{
		{Name: "s0", Command: "true", Timeout: 60e9, ContinueOnError: continueOnError}}, targets))
	return windowBundle{dispatchBundle: b, id: id}
}

// finish delivers every claimable request of the deployment and ends its commands:
// those on targets in fail with exit code 3, the others succeed.
func (w windowBundle) finish(t *testing.T, fail ...string) {
	t.Helper()
	ctx := context.Background()
	claim, err := schema.ClaimPendingFor(ctx, w.pool, replica, uuid.NewString(), 10000)
	require.NoError(t, err)
	_, err = schema.DeliverClaimed(ctx, w.pool, replica, refs(claim.Claimed), deliverOpts)
	require.NoError(t, err)
	_, err = w.pool.Exec(ctx, `
		UPDATE command_queue c SET status = CASE WHEN t.name = ANY($2) THEN 'failed' ELSE 'succeeded' END,
		       exit_code = CASE WHEN t.name = ANY($2) THEN 3 ELSE 0 END, finished_at = now()
		FROM targets t WHERE t.id = c.target_id AND c.deployment_id = $1 AND c.status = 'queued'`, w.id, fail)
	require.NoError(t, err)
}

func (w windowBundle) advance(t *testing.T) domain.StepProgress {
	t.Helper()
	p, err := schema.AdvanceStep(w.ctx, w.pool, w.id, 0)
	require.NoError(t, err)
	require.LessOrEqual(t, len(p.FailedTargets), schema.MaxFailedTargetsShown)
	return p
}

func TestAdvanceStepKeepsTheWindowAtMaxParallel(t *testing.T) {
	t.Parallel()
	w := setupWindow(t, 5, 2, false)

	p := w.advance(t)
	require.Equal(t, domain.StepProgress{Total: 5, Enqueued: 2, Running: 2, Skipped: 3}, p)
	require.Equal(t, p, w.advance(t), "a repeated call enqueues nothing while the window is full")

	w.finish(t)
	p = w.advance(t)
	require.Equal(t, domain.StepProgress{Total: 5, Enqueued: 4, Succeeded: 2, Running: 2, Skipped: 1}, p, "two ended: two more start")
	w.finish(t)
	p = w.advance(t)
	require.Equal(t, 5, p.Enqueued)
	require.Equal(t, 1, p.Running)
	w.finish(t)
	p = w.advance(t)
	require.Equal(t, domain.StepProgress{Total: 5, Enqueued: 5, Succeeded: 5, Done: true, Status: "succeeded"}, p)

	var status, env, dir string
	require.NoError(t, w.pool.QueryRow(w.ctx, `SELECT status FROM deployment_steps WHERE deployment_id = $1`, w.id).Scan(&status))
	require.Equal(t, "succeeded", status)
	require.NoError(t, w.pool.QueryRow(w.ctx, `SELECT env::text, working_dir FROM command_queue WHERE deployment_id = $1 LIMIT 1`, w.id).Scan(&env, &dir))
	require.JSONEq(t, `{"A":"1"}`, env, "the step's env reaches the command")
	require.Equal(t, "/srv", dir)
	var ended int
	require.NoError(t, w.pool.QueryRow(w.ctx, `SELECT count(*) FROM deployment_events WHERE deployment_id = $1 AND type = 'step.succeeded'`, w.id).Scan(&ended))
	require.Equal(t, 1, ended, "the end is recorded once")
	require.Equal(t, p, w.advance(t), "a call after the end reports it again")
}

func TestAdvanceStepStopsStartingTargetsAfterAFailure(t *testing.T) {
	t.Parallel()
	w := setupWindow(t, 6, 2, false)
	w.advance(t)
	w.finish(t, "web-00001")
	p := w.advance(t)
	require.Equal(t, domain.StepProgress{Total: 6, Enqueued: 2, Succeeded: 1, Failed: 1, Skipped: 4, Done: true, Status: "failed",
		FailedTargets: p.FailedTargets}, p)
	require.Len(t, p.FailedTargets, 1)
	require.Equal(t, "web-00001", p.FailedTargets[0].Target)
	require.Equal(t, "exit code 3", p.FailedTargets[0].Error)
}

func TestAdvanceStepContinuesOnErrorAndNamesAtMostTwentyFailures(t *testing.T) {
	t.Parallel()
	w := setupWindow(t, 30, 0, true)
	p := w.advance(t)
	require.Equal(t, 30, p.Running, "max_parallel 0 runs every target at once")
	fail := make([]string, 25)
	for i := range fail {
		fail[i] = fmt.Sprintf("web-%05d", i+1)
	}
	w.finish(t, fail...)
	p = w.advance(t)
	require.True(t, p.Done)
	require.Equal(t, "failed", p.Status)
	require.Equal(t, 25, p.Failed)
	require.Equal(t, 5, p.Succeeded)
	require.Len(t, p.FailedTargets, schema.MaxFailedTargetsShown)
}

func TestSkipStepsSkipsEveryPendingStepOnce(t *testing.T) {
	t.Parallel()
	b := setupDispatch(t)
	b.addLabelledTargets(t, "web-", 3)
	id := uuid.New()
	_, _, err := schema.CreateDeployment(b.ctx, b.pool, schema.NewDeployment{ID: id, Name: "skip", Priority: "normal", Spec: []byte(`{}`)})
	require.NoError(t, err)
	steps := make([]schema.StepRecord, 4)
	for i := range steps {
		steps[i] = schema.StepRecord{Name: fmt.Sprintf("s%d", i), Command: "true", Timeout: 60e9}
	}
	targets, err := schema.ResolveTargets(b.ctx, b.pool, nil, map[string]string{"role": "web"})
	require.NoError(t, err)
	require.NoError(t, schema.StartDeployment(b.ctx, b.pool, id, steps, targets))
	require.NoError(t, schema.SkipSteps(b.ctx, b.pool, id, 1))
	require.NoError(t, schema.SkipSteps(b.ctx, b.pool, id, 1))
	var skipped, events int
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM deployment_steps WHERE deployment_id = $1 AND status = 'skipped'`, id).Scan(&skipped))
	require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM deployment_events WHERE deployment_id = $1 AND type = 'step.skipped' AND data->>'skipped' = '3'`, id).Scan(&events))
	require.Equal(t, 3, skipped)
	require.Equal(t, 3, events)
}
