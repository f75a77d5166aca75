package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Rollout says how a step (or every step of a deployment) reaches its targets: in
// batches, with a pause between them, within a fleet-wide failure budget, and
// optionally with a canary first batch that must pass a health check.
type Rollout struct {
	// Batches are the batch sizes in order, each a count (5) or a percent of the
	// targets ("10%"), as Ansible's serial list: the last size repeats until every
	// target ran. Empty: one batch of every target.
	Batches []BatchSize `json:"batches,omitempty"`
	// PauseBetween is a duration ("30s") to wait between batches, or "approval" to
	// wait for an approve decision before each batch after the first.
	PauseBetween string `json:"pause_between,omitempty"`
	// MaxFailures is the fleet-wide failure budget: how many target failures, counted
	// across batches and steps, the deployment tolerates. Exceeding it starts no new
	// batch and fails the deployment naming the budget.
	MaxFailures *int `json:"max_failures,omitempty"`
	// MaxFailurePercent is the same budget as a percent of the deployment's targets.
	MaxFailurePercent *float64 `json:"max_failure_percent,omitempty"`
	// OnBudgetExceeded is what happens to commands still running when the budget is
	// exceeded: "finish" (the default) lets them end, "cancel" cancels them.
	OnBudgetExceeded string `json:"on_budget_exceeded,omitempty"`
	// Canary makes the first batch a canary that must pass a health check before the
	// rest run.
	Canary *Canary `json:"canary,omitempty"`
}

// Canary is the health gate after a rollout's first batch.
type Canary struct {
	// Verify is the command that checks health; it must succeed HealthyChecks times
	// over HealthyWindow, else the deployment's on_failure steps run.
	Verify string `json:"verify"`
	// VerifyOn is where Verify runs: "canary" (the default: every host of the first
	// batch) or the name of one target.
	VerifyOn string `json:"verify_on,omitempty"`
	// HealthyChecks is how many times Verify must succeed (default 1).
	HealthyChecks int `json:"healthy_checks,omitempty"`
	// HealthyWindow is the time the checks are spread over (default 0: back to back).
	HealthyWindow string `json:"healthy_window,omitempty"`
}

// BatchSize is one entry of a rollout's batches: a count of targets, or a percent of
// them. In JSON and YAML it is a number (5) or a string ("10%", "5").
type BatchSize struct {
	// Count is an absolute number of targets; zero when Percent is set.
	Count int
	// Percent is a percent of the targets, above 0 and at most 100.
	Percent float64
}

// Rollout constants.
const (
	// PauseApproval is the pause_between that waits for an approve decision.
	PauseApproval = "approval"
	// BudgetFinish lets running commands end when the failure budget is exceeded.
	BudgetFinish = "finish"
	// BudgetCancel cancels running commands when the failure budget is exceeded.
	BudgetCancel = "cancel"
	// VerifyOnCanary runs a canary's verify command on every host of the canary batch.
	VerifyOnCanary = "canary"
	// MaxBatches caps a rollout's batch list.
	MaxBatches = 100
	// MaxHealthyChecks caps a canary's healthy_checks.
	MaxHealthyChecks = 100
	// MaxPauseBetween caps a rollout's pause between batches, and a canary's window.
	MaxPauseBetween = 24 * time.Hour
)

// MarshalJSON writes a count as a number and a percent as "N%".
func (b BatchSize) MarshalJSON() ([]byte, error) {
	if b.Percent > 0 {
		return json.Marshal(strconv.FormatFloat(b.Percent, 'f', -1, 64) + "%")
	}
	return json.Marshal(b.Count)
}

// UnmarshalJSON reads a number, a numeric string or a percent string ("10%").
func (b *BatchSize) UnmarshalJSON(data []byte) error {
	data = bytes.TrimSpace(data)
	if len(data) > 0 && data[0] != '"' {
		var n int
		if err := json.Unmarshal(data, &n); err != nil {
			return batchSizeError(string(data))
		}
		*b = BatchSize{Count: n}
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return err
	}
	parsed, err := ParseBatchSize(s)
	if err != nil {
		return batchSizeError(strconv.Quote(s))
	}
	*b = parsed
	return nil
}

// batchSizeError is the decoding error of a batch size that is neither a whole number
// nor a percent; the JSON decoder adds the field path to it, and Parse names the field.
func batchSizeError(got string) error {
	return &json.UnmarshalTypeError{Value: got, Type: reflect.TypeFor[BatchSize]()}
}

// batchSizeProblem is how Parse words a batch size it cannot read.
const batchSizeProblem = `a batch size is a whole number or a percent like "10%%", got %s`

// ParseBatchSize reads "5" or "10%".
func ParseBatchSize(s string) (BatchSize, error) {
	t := strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(t, "%"); ok {
		f, err := strconv.ParseFloat(strings.TrimSpace(p), 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return BatchSize{}, fmt.Errorf("a batch percent is a number followed by %%, like \"10%%\", got %q", s)
		}
		return BatchSize{Percent: f}, nil
	}
	n, err := strconv.Atoi(t)
	if err != nil {
		return BatchSize{}, fmt.Errorf("a batch size is a whole number or a percent like \"10%%\", got %q", s)
	}
	return BatchSize{Count: n}, nil
}

// String is the size as the spec writes it.
func (b BatchSize) String() string {
	if b.Percent > 0 {
		return strconv.FormatFloat(b.Percent, 'f', -1, 64) + "%"
	}
	return strconv.Itoa(b.Count)
}

// Of is how many of n targets the size names: a percent rounds down, but never below
// one target.
func (b BatchSize) Of(n int) int {
	if b.Percent > 0 {
		return max(1, int(math.Floor(float64(n)*b.Percent/100)))
	}
	return b.Count
}

// SplitBatches splits n targets into batch sizes as Ansible's serial list does: each
// size in turn, the last repeating until every target has a batch, the final batch
// cut to what remains. No sizes, or n of zero or less, give one batch of n (none for
// n of zero). The sizes sum to n.
func SplitBatches(n int, sizes []BatchSize) []int {
	if n <= 0 {
		return nil
	}
	if len(sizes) == 0 {
		return []int{n}
	}
	var out []int
	for left, i := n, 0; left > 0; i++ {
		size := sizes[min(i, len(sizes)-1)].Of(n)
		size = max(1, min(size, left))
		out = append(out, size)
		left -= size
	}
	return out
}

// FailureBudget is how many failed targets, out of n, a rollout tolerates across
// batches and steps; ok is false when it sets no budget. With both fields set the
// smaller budget holds.
func (r Rollout) FailureBudget(n int) (budget int, ok bool) {
	budget = math.MaxInt
	if r.MaxFailures != nil {
		budget, ok = *r.MaxFailures, true
	}
	if r.MaxFailurePercent != nil {
		budget, ok = min(budget, int(math.Floor(float64(n)**r.MaxFailurePercent/100))), true
	}
	return budget, ok
}

// PauseDuration is the rollout's pause between batches when it is a duration (zero
// when none or when it waits for an approval).
func (r Rollout) PauseDuration() time.Duration {
	d, err := time.ParseDuration(r.PauseBetween)
	if err != nil {
		return 0
	}
	return d
}

// validate checks a rollout, naming each problem under at.
func (r Rollout) validate(p *problems, at string) {
	if len(r.Batches) > MaxBatches {
		p.add(at+".batches", "at most %d sizes, got %d", MaxBatches, len(r.Batches))
	}
	for i, b := range r.Batches {
		field := fmt.Sprintf("%s.batches[%d]", at, i)
		switch {
		case b.Percent != 0 && (b.Percent <= 0 || b.Percent > 100):
			p.add(field, "a percent must be above 0 and at most 100, got %s", b)
		case b.Percent == 0 && b.Count <= 0:
			p.add(field, "a batch must have at least one target, got %s", b)
		case b.Percent == 0 && b.Count > MaxTargets:
			p.add(field, "at most %d targets, got %d", MaxTargets, b.Count)
		}
	}
	if r.PauseBetween != "" && r.PauseBetween != PauseApproval {
		validDuration(p, at+".pause_between", r.PauseBetween, MaxPauseBetween, `a duration like "30s", or "approval"`)
	}
	if r.MaxFailures != nil && *r.MaxFailures < 0 {
		p.add(at+".max_failures", "must not be negative, got %d", *r.MaxFailures)
	}
	if f := r.MaxFailurePercent; f != nil && (math.IsNaN(*f) || *f < 0 || *f > 100) {
		p.add(at+".max_failure_percent", "must be between 0 and 100, got %v", *f)
	}
	switch r.OnBudgetExceeded {
	case "", BudgetFinish, BudgetCancel:
	default:
		p.add(at+".on_budget_exceeded", "must be finish or cancel, got %q", r.OnBudgetExceeded)
	}
	if r.Canary != nil {
		r.Canary.validate(p, at+".canary")
	}
}

// validate checks a canary, naming each problem under at.
func (c Canary) validate(p *problems, at string) {
	if strings.TrimSpace(c.Verify) == "" {
		p.add(at+".verify", "required: the command that checks the canary's health")
	}
	p.storable(at+".verify", c.Verify, MaxCommandBytes)
	if c.VerifyOn != "" && c.VerifyOn != VerifyOnCanary && !namePattern.MatchString(c.VerifyOn) {
		p.add(at+".verify_on", "must be canary or a target name, got %q", c.VerifyOn)
	}
	if c.HealthyChecks < 0 || c.HealthyChecks > MaxHealthyChecks {
		p.add(at+".healthy_checks", "must be between 0 and %d, got %d", MaxHealthyChecks, c.HealthyChecks)
	}
	if c.HealthyWindow != "" {
		validDuration(p, at+".healthy_window", c.HealthyWindow, MaxPauseBetween, `a duration like "30s"`)
	}
}

// validDuration refuses a duration that does not parse, is not positive or is over
// limit, naming the field and what it expects.
func validDuration(p *problems, field, v string, limit time.Duration, want string) {
	d, err := time.ParseDuration(v)
	switch {
	case err != nil || d <= 0:
		p.add(field, "must be %s, got %q", want, v)
	case d > limit:
		p.add(field, "at most %s, got %s", limit, d)
	}
}

// validateRollback checks a deployment's on_failure steps: plain command steps, which
// never wait for a person and never roll back themselves.
func (d Deployment) validateRollback(p *problems) {
	if len(d.OnFailure) > MaxSteps {
		p.add("on_failure", "at most %d steps, got %d", MaxSteps, len(d.OnFailure))
	}
	names := map[string]bool{}
	for i, s := range d.OnFailure {
		at := fmt.Sprintf("on_failure[%d]", i)
		p.stepName(at, s.Name, names, "rollback step")
		if s.Kind != "" && s.Kind != StepKindCommand || s.OnFailure != "" || s.Rollout != nil || len(s.Approvers) > 0 {
			p.add(at, "a rollback step is a plain command step: no kind, on_failure, approvers or rollout")
			continue
		}
		s.validate(p, at)
	}
}
