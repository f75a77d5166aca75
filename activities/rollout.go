package activities

import (
	"context"
	"fmt"

	"github.com/mantis-deploy/mantis/internal/contract/activityio"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/domain"
	"github.com/mantis-deploy/mantis/schema"
)

// resolveVerifyHosts refuses a spec whose canary verifies on a target that is not
// registered, naming the field: its verify step could never run.
func (a *Activities) resolveVerifyHosts(ctx context.Context, s spec.Deployment) error {
	check := func(field string, r *spec.Rollout) error {
		if r == nil || r.Canary == nil || r.Canary.VerifyOn == "" || r.Canary.VerifyOn == spec.VerifyOnCanary {
			return nil
		}
		if _, err := schema.ResolveTargets(ctx, a.DB, []string{r.Canary.VerifyOn}, nil); err != nil {
			if _, ok := err.(*domain.InputError); ok {
				return domain.Invalid(field+".canary.verify_on", fmt.Sprintf("unknown target %q", r.Canary.VerifyOn))
			}
			return err
		}
		return nil
	}
	if err := check("rollout", s.Rollout); err != nil {
		return err
	}
	for i, st := range s.Steps {
		if err := check(fmt.Sprintf("steps[%d].rollout", i), st.Rollout); err != nil {
			return err
		}
	}
	return nil
}

// TouchedTargets counts the targets the deployment's steps (positions below Steps)
// reached: a prefix of its targets in order, since every step starts them in that
// order. Its rollback steps run on that prefix.
//
// Runs from before the "struct-activity-io" change schedule it; newer runs
// schedule CountTouchedTargets.
func (a *Activities) TouchedTargets(ctx context.Context, in activityio.TouchedTargetsInput) (int, error) {
	id, err := deploymentID(in.DeploymentID)
	if err != nil {
		return 0, err
	}
	return schema.TouchedTargets(ctx, a.DB, id, in.Steps)
}
