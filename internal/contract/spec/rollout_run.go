package spec

import (
	"fmt"
	"math"
	"strings"
	"time"
)

// RecordedStep is one row of a deployment's step table: a step of the spec, a rollback
// step, or a canary's verify step.
type RecordedStep struct {
	Name            string
	Command         string
	Timeout         time.Duration
	ContinueOnError bool
}

// Names of the rows a deployment records for its rollback and verify steps. A ':'
// never appears in a step's own name (namePattern), so they never clash with one.
const (
	rollbackStepPrefix = "rollback: "
	verifyStepPrefix   = "verify: "
)

// RecordedSteps lists every step a deployment records, in position order: its steps,
// then its rollback steps, then the verify step of each step whose rollout has a
// canary. The workflow finds the last two by RollbackPosition and VerifyPosition.
// Call after WithDefaults.
func (d Deployment) RecordedSteps() []RecordedStep {
	out := make([]RecordedStep, 0, len(d.Steps)+len(d.OnFailure))
	for _, s := range d.Steps {
		out = append(out, RecordedStep{Name: s.Name, Command: s.RecordedCommand(), Timeout: s.TimeoutDuration(), ContinueOnError: s.ContinueOnError})
	}
	for _, s := range d.OnFailure {
		// A rollback step never stops the rollback: every one of them runs.
		out = append(out, RecordedStep{Name: rollbackStepPrefix + s.Name, Command: s.Command, Timeout: s.TimeoutDuration(), ContinueOnError: true})
	}
	for _, s := range d.Steps {
		if r := d.RolloutOf(s); r != nil && r.Canary != nil {
			out = append(out, RecordedStep{Name: verifyStepPrefix + s.Name, Command: r.Canary.VerifyCommand(), Timeout: r.Canary.Timeout()})
		}
	}
	return out
}

// RolloutOf is the rollout step runs under: its own, else the deployment's; nil when
// neither sets one (every target at once, within max_parallel).
func (d Deployment) RolloutOf(s Step) *Rollout {
	if s.IsApproval() {
		return nil
	}
	if s.Rollout != nil {
		return s.Rollout
	}
	return d.Rollout
}

// RollbackPosition is the recorded position of rollback step j.
func (d Deployment) RollbackPosition(j int) int { return len(d.Steps) + j }

// VerifyPosition is the recorded position of the verify step of step i, and whether
// step i has one (its rollout has a canary).
func (d Deployment) VerifyPosition(i int) (int, bool) {
	pos := len(d.Steps) + len(d.OnFailure)
	for k, s := range d.Steps {
		r := d.RolloutOf(s)
		if r == nil || r.Canary == nil {
			continue
		}
		if k == i {
			return pos, true
		}
		pos++
	}
	return 0, false
}

// HasRollouts reports whether any step runs under a rollout or the deployment has
// rollback steps: what the Deployment workflow carries out behind its rollout
// version.
func (d Deployment) HasRollouts() bool {
	if len(d.OnFailure) > 0 {
		return true
	}
	for _, s := range d.Steps {
		if d.RolloutOf(s) != nil {
			return true
		}
	}
	return false
}

// Checks is how many times the verify command must succeed (healthy_checks, default 1).
func (c Canary) Checks() int { return max(1, c.HealthyChecks) }

// Interval is the wait between two checks: the healthy window spread evenly, the
// first check at its start and the last at its end, in whole seconds (rounded up).
func (c Canary) Interval() time.Duration {
	w, err := time.ParseDuration(c.HealthyWindow)
	if err != nil || w <= 0 || c.Checks() < 2 {
		return 0
	}
	secs := math.Ceil(w.Seconds() / float64(c.Checks()-1))
	return time.Duration(secs) * time.Second
}

// verifyCheckTimeout bounds one run of a verify command within the verify step.
const verifyCheckTimeout = 5 * time.Minute

// Timeout is the verify step's timeout: every check, and the waits between them.
func (c Canary) Timeout() time.Duration {
	t := time.Duration(c.Checks())*verifyCheckTimeout + time.Duration(c.Checks()-1)*c.Interval()
	return min(t, MaxStepTimeout)
}

// VerifyCommand is the shell command a canary's verify step runs on each host: the
// verify command, Checks times, Interval apart, ending at the first failure with its
// exit code. Each check prints a line saying which it is, so the output shows them.
func (c Canary) VerifyCommand() string {
	n := c.Checks()
	if n == 1 {
		return c.Verify
	}
	var b strings.Builder
	fmt.Fprintf(&b, "mantis_check=1\nwhile :; do\n  echo \"mantis: health check $mantis_check of %d\"\n  (\n%s\n  ) || exit $?\n", n, c.Verify)
	fmt.Fprintf(&b, "  [ \"$mantis_check\" -ge %d ] && exit 0\n  mantis_check=$((mantis_check + 1))\n  sleep %d\ndone\n", n, int(c.Interval().Seconds()))
	return b.String()
}
