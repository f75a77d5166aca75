package httpapi

import (
	"net/http"
	"time"

	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/schema"
)

// writePlan answers POST /api/v1/deployments?dry_run=true with what d would do if
// created now: its targets in each step's batches, the steps, the targets offline,
// the freezes that would refuse it and the limits that may hold it back. It only
// reads.
func (s *server) writePlan(w http.ResponseWriter, r *http.Request, d spec.Deployment) {
	plan, err := s.plan(r, d, time.Now())
	if err != nil {
		writeServerError(w, r, s.logger, err)
		return
	}
	api.WriteJSON(w, http.StatusOK, plan)
}

// plan reads what a plan of d shows at now.
func (s *server) plan(r *http.Request, d spec.Deployment, now time.Time) (api.DeploymentPlan, error) {
	ctx := r.Context()
	targets, err := schema.ResolveTargets(ctx, s.db, d.Targets, d.TargetSelector)
	if err != nil {
		return api.DeploymentPlan{}, err
	}
	p := api.DeploymentPlan{Name: d.Name, Priority: d.Priority, Targets: targets, MaxParallel: d.MaxParallel, At: now.UTC()}
	if p.Offline, err = schema.OfflineTargets(ctx, s.db, targets, s.heartbeatTimeout); err != nil {
		return api.DeploymentPlan{}, err
	}
	freezes, err := schema.BlockingFreezes(ctx, s.db, targets, now)
	if err != nil {
		return api.DeploymentPlan{}, err
	}
	limits, err := schema.LimitsCoveringTargets(ctx, s.db, targets)
	if err != nil {
		return api.DeploymentPlan{}, err
	}
	p.Freezes, p.Limits = mapped(freezes, blockingFreezeOf), mapped(limits, planLimitOf)
	for i, st := range d.Steps {
		rollout := d.Rollout
		if st.Rollout != nil {
			rollout = st.Rollout
		}
		p.Steps = append(p.Steps, api.PlanStep{Position: i, Name: st.Name, Command: st.Command, Timeout: st.Timeout,
			Batches: PlanBatches(targets, rollout)})
	}
	return p, nil
}

// PlanBatches splits targets, in their sorted order, into the batches of rollout
// (spec.SplitBatches); no rollout is one batch of every target.
func PlanBatches(targets []string, rollout *spec.Rollout) [][]string {
	var sizes []spec.BatchSize
	if rollout != nil {
		sizes = rollout.Batches
	}
	out := [][]string{}
	at := 0
	for _, n := range spec.SplitBatches(len(targets), sizes) {
		out = append(out, targets[at:at+n])
		at += n
	}
	return out
}
