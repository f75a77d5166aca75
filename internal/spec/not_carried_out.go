package spec

import "fmt"

// NotCarriedOutYet is the problem of a spec field that is parsed, validated and planned
// but that the Deployment workflow does not carry out yet.
const NotCarriedOutYet = "not carried out yet: a deployment with it would run every step on every target " +
	"at once; the plan (dry_run) shows its batches"

// NotCarriedOut lists, as "field: problem", the rollout fields of d that Mantis
// validates and plans but does not carry out yet: a deployment's or a step's rollout
// and the deployment's on_failure rollback steps. Creating a deployment that sets them
// is refused, so that nobody relies on a batch or a failure budget that would not hold.
func NotCarriedOut(d Deployment) []string {
	var out []string
	if d.Rollout != nil {
		out = append(out, "rollout: "+NotCarriedOutYet)
	}
	for i, s := range d.Steps {
		if s.Rollout != nil {
			out = append(out, fmt.Sprintf("steps[%d].rollout: %s", i, NotCarriedOutYet))
		}
	}
	if len(d.OnFailure) > 0 {
		out = append(out, "on_failure: "+NotCarriedOutYet)
	}
	return out
}
