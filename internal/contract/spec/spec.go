// Package spec defines the deployment specification users submit (YAML or JSON): what
// to run, where, in which order. It is plain data with validation, shared by the API,
// mantisctl and the Deployment workflow (whose input it is).
package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mantis-deploy/mantis/internal/safetext"
	"github.com/mantis-deploy/mantis/internal/secretenv"
)

// Step is one ordered step: a command run on every target.
type Step struct {
	Name string `json:"name"`
	// Command is the shell command run on each target; an approval step has none.
	Command string `json:"command,omitempty"`
	// Timeout is a duration such as "90s" or "5m" (default 10m).
	Timeout string `json:"timeout,omitempty"`
	// ContinueOnError lets the deployment go on when the step fails on some target.
	ContinueOnError bool              `json:"continue_on_error,omitempty"`
	Env             map[string]string `json:"env,omitempty"`
	// EnvSecret is env whose values are secret: a literal, or a reference resolved on
	// Mandible when Thorax fetches the command ("file:/path", "env:MANTIS_SECRET_X").
	// Mandible seals each value (package secretenv) before it stores the spec or
	// starts its workflow; views show secretenv.Redacted.
	EnvSecret  map[string]string `json:"env_secret,omitempty"`
	WorkingDir string            `json:"working_dir,omitempty"`
	// Kind is "command" (the default: Command runs on every target) or "approval":
	// the step runs nothing and waits for an approve or reject decision, or for its
	// timeout (default 24h), then decides on_timeout.
	Kind string `json:"kind,omitempty"`
	// Approvers names the API tokens that may decide an approval step or the failure
	// of an on_failure: ask step; empty: any token with the deploy scope.
	Approvers []string `json:"approvers,omitempty"`
	// OnTimeout is what an approval step decides when nobody did: "reject" (the
	// default) or "approve".
	OnTimeout string `json:"on_timeout,omitempty"`
	// AllowSelfApproval lets the token that created the deployment approve the
	// approvals this step waits for (an approval step, or its rollout's batches).
	// Unset, the author's approve is refused: an approval is a second person's.
	AllowSelfApproval bool `json:"allow_self_approval,omitempty"`
	// OnFailure "ask" makes a failed step wait for a person to retry it on its failed
	// targets, skip it, or abort the deployment.
	OnFailure string `json:"on_failure,omitempty"`
	// Rollout overrides the deployment's rollout for this step.
	Rollout *Rollout `json:"rollout,omitempty"`
}

// TimeoutDuration is the step's timeout (call after Validate and WithDefaults).
func (s Step) TimeoutDuration() time.Duration {
	d, err := time.ParseDuration(s.Timeout)
	if err != nil || d <= 0 {
		return DefaultStepTimeout
	}
	return d
}

// Deployment is a deployment specification.
type Deployment struct {
	Name     string `json:"name"`
	Priority string `json:"priority,omitempty"`
	// Targets names targets; TargetSelector picks registered targets whose labels
	// match every key=value. Either or both; the union is deployed to.
	Targets        []string          `json:"targets,omitempty"`
	TargetSelector map[string]string `json:"target_selector,omitempty"`
	Steps          []Step            `json:"steps"`
	// MaxParallel caps how many targets run a step at once (0: all).
	MaxParallel int `json:"max_parallel,omitempty"`
	// Rollout says how each step reaches its targets: batches, pauses, a fleet-wide
	// failure budget and a canary. A step's own rollout overrides it.
	Rollout *Rollout `json:"rollout,omitempty"`
	// OnFailure are rollback steps: when the deployment fails, they run on the targets
	// it touched, and their own failure is reported but rolls nothing back.
	OnFailure []Step `json:"on_failure,omitempty"`
	// IdempotencyKey makes creation idempotent: the same key yields the same deployment.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// DeploymentID is set by Mandible when it creates the deployment; a deployment
	// started straight from a Temporal client leaves it empty and gets one derived
	// from its workflow id.
	DeploymentID string `json:"deployment_id,omitempty"`
}

// Defaults and limits.
const (
	DefaultPriority    = "normal"
	DefaultStepTimeout = 10 * time.Minute
	// MaxStepTimeout caps a step's timeout.
	MaxStepTimeout = 24 * time.Hour
	// MaxSteps caps a deployment's steps.
	MaxSteps = 100
	// MaxTargets caps the targets a deployment runs on: the named ones and those its
	// target_selector matches, together, once resolved against the registered targets.
	MaxTargets = 10000
)

// TooManyTargets is the refusal of a deployment that resolves to n targets, more than
// MaxTargets.
func TooManyTargets(n int) string {
	return fmt.Sprintf("deployment resolves to %d targets; at most %d", n, MaxTargets)
}

// Errors lists every problem of a spec, each naming its field path.
type Errors []FieldError

// FieldError is one problem at a field path such as steps[1].timeout.
type FieldError struct {
	Field   string `json:"field"`
	Problem string `json:"problem"`
}

func (e Errors) Error() string {
	parts := make([]string, len(e))
	for i, f := range e {
		parts[i] = f.Field + ": " + f.Problem
	}
	return "invalid deployment spec: " + strings.Join(parts, "; ")
}

var (
	namePattern   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	envKeyPattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// CommandDefaults returns a command's priority and timeout with the defaults filled
// in where they are unset: priority DefaultPriority, timeout DefaultStepTimeout. A
// deployment's spec (WithDefaults) and a dispatch request alike default through it.
func CommandDefaults(priority string, timeout time.Duration) (string, time.Duration) {
	if priority == "" {
		priority = DefaultPriority
	}
	if timeout <= 0 {
		timeout = DefaultStepTimeout
	}
	return priority, timeout
}

// WithDefaults fills the defaults in (CommandDefaults): priority normal, step timeout
// 10 minutes.
func (d Deployment) WithDefaults() Deployment {
	d.Priority, _ = CommandDefaults(d.Priority, 0)
	steps := make([]Step, len(d.Steps))
	for i, s := range d.Steps {
		if s.Timeout == "" && s.IsApproval() {
			s.Timeout = DefaultApprovalTimeout.String()
		} else if s.Timeout == "" {
			_, timeout := CommandDefaults("", 0)
			s.Timeout = timeout.String()
		}
		steps[i] = s
	}
	d.Steps = steps
	return d
}

// Bounds on the free text of a spec: what one deployment may ask PostgreSQL, Temporal
// and every agent to carry.
const (
	MaxCommandBytes    = 64 << 10
	MaxEnvVars         = 256
	MaxEnvValueBytes   = 32 << 10
	MaxWorkingDirBytes = 4096
	MaxLabelBytes      = 1024
)

// Validate returns every problem of d as Errors, or nil.
func (d Deployment) Validate() error {
	var p problems
	if !namePattern.MatchString(d.Name) {
		p.add("name", "required: letters, digits, '.', '_' or '-', at most 128, got %q", d.Name)
	}
	switch d.Priority {
	case "", "high", "normal", "low":
	default:
		p.add("priority", "must be high, normal or low, got %q", d.Priority)
	}
	d.validateTargets(&p)
	p.storable("idempotency_key", d.IdempotencyKey, 200)
	if len(d.Steps) == 0 {
		p.add("steps", "at least one step is required")
	}
	if len(d.Steps) > MaxSteps {
		p.add("steps", "at most %d, got %d", MaxSteps, len(d.Steps))
	}
	names := map[string]bool{}
	for i, s := range d.Steps {
		at := fmt.Sprintf("steps[%d]", i)
		p.stepName(at, s.Name, names, "step")
		s.validate(&p, at)
	}
	if d.MaxParallel < 0 {
		p.add("max_parallel", "must not be negative, got %d", d.MaxParallel)
	}
	if d.Rollout != nil {
		d.Rollout.validate(&p, "rollout")
	}
	d.validateRollback(&p)
	if len(p.errs) > 0 {
		return p.errs
	}
	return nil
}

// problems collects the problems of a spec as Validate finds them.
type problems struct{ errs Errors }

// add records a problem at field.
func (p *problems) add(field, format string, args ...any) {
	p.errs = append(p.errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
}

// stepName checks the name of the step at, which must be unique among the names
// already seen (of the same list, whose steps are called what).
func (p *problems) stepName(at, name string, seen map[string]bool, what string) {
	if !namePattern.MatchString(name) {
		p.add(at+".name", "required: letters, digits, '.', '_' or '-', got %q", name)
	} else if seen[name] {
		p.add(at+".name", "%q is used by an earlier %s", name, what)
	}
	seen[name] = true
}

// storable refuses text PostgreSQL cannot store (NUL, bytes that are not UTF-8) and
// text longer than limit, naming the field.
func (p *problems) storable(field, v string, limit int) {
	if problem := safetext.Unstorable(v, limit); problem != "" {
		p.add(field, "%s", problem)
	}
}

// validateTargets checks the named targets and the target selector.
func (d Deployment) validateTargets(p *problems) {
	if len(d.Targets) == 0 && len(d.TargetSelector) == 0 {
		p.add("targets", "name at least one target, or give a target_selector")
	}
	if len(d.Targets) > MaxTargets {
		p.add("targets", "at most %d, got %d", MaxTargets, len(d.Targets))
	}
	seen := map[string]bool{}
	for i, t := range d.Targets {
		if !namePattern.MatchString(t) {
			p.add(fmt.Sprintf("targets[%d]", i), "not a valid target name: %q", t)
		} else if seen[t] {
			p.add(fmt.Sprintf("targets[%d]", i), "%q is listed twice", t)
		}
		seen[t] = true
	}
	for _, k := range sortedKeys(d.TargetSelector) {
		if k == "" {
			p.add("target_selector", "label keys must not be empty")
		}
		p.storable("target_selector."+k, k+d.TargetSelector[k], MaxLabelBytes)
	}
}

// validate checks one step's fields but its name (unique across steps, which
// Validate checks), naming each problem under at.
func (s Step) validate(p *problems, at string) {
	if s.validateKind(p, at) {
		return
	}
	if s.Rollout != nil {
		s.Rollout.validate(p, at+".rollout")
	}
	if strings.TrimSpace(s.Command) == "" {
		p.add(at+".command", "required")
	}
	p.storable(at+".command", s.Command, MaxCommandBytes)
	p.storable(at+".working_dir", s.WorkingDir, MaxWorkingDirBytes)
	if len(s.Env) > MaxEnvVars {
		p.add(at+".env", "at most %d variables, got %d", MaxEnvVars, len(s.Env))
	}
	if s.Timeout != "" {
		if t, err := time.ParseDuration(s.Timeout); err != nil || t <= 0 {
			p.add(at+".timeout", "must be a positive duration like \"90s\" or \"5m\", got %q", s.Timeout)
		} else if t > MaxStepTimeout {
			p.add(at+".timeout", "at most 24h, got %s", t)
		}
	}
	for _, k := range sortedKeys(s.Env) {
		if !envKeyPattern.MatchString(k) {
			p.add(at+".env", "%q is not a valid environment variable name", k)
		} else {
			p.storable(at+".env."+k, s.Env[k], MaxEnvValueBytes)
		}
		if secretenv.IsSealed(s.Env[k]) {
			p.add(at+".env."+k, "a sealed secret belongs in env_secret")
		}
	}
	for _, fe := range s.secretProblems(at) {
		p.add(fe.Field, "%s", fe.Problem)
	}
	if s.WorkingDir != "" && !strings.HasPrefix(s.WorkingDir, "/") {
		p.add(at+".working_dir", "must be an absolute path, got %q", s.WorkingDir)
	}
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Parse reads a spec from YAML or JSON (JSON is YAML), refusing unknown fields, and
// validates it. Every problem is reported, each naming its field.
func Parse(b []byte) (Deployment, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return Deployment{}, Errors{{Field: "", Problem: "the spec is empty"}}
	}
	js, err := yaml.YAMLToJSON(b)
	if err != nil {
		return Deployment{}, Errors{{Field: "", Problem: "not valid YAML or JSON: " + err.Error()}}
	}
	var d Deployment
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Deployment{}, Errors{decodeProblem(err)}
	}
	return d, d.Validate()
}

// decodeProblem names the field a JSON decoding error is about.
func decodeProblem(err error) FieldError {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		if typeErr.Field == "" {
			return FieldError{Field: "", Problem: fmt.Sprintf("the spec must be a mapping of fields such as name and steps, got %s", typeErr.Value)}
		}
		if typeErr.Type == reflect.TypeFor[BatchSize]() {
			return FieldError{Field: typeErr.Field, Problem: fmt.Sprintf(batchSizeProblem, typeErr.Value)}
		}
		return FieldError{Field: typeErr.Field, Problem: fmt.Sprintf("must be %s, got %s", typeErr.Type, typeErr.Value)}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		if f = strings.Trim(f, `"`); f == "" {
			return FieldError{Field: "", Problem: "an empty key: every field has a name"}
		}
		return FieldError{Field: f, Problem: "unknown field"}
	}
	return FieldError{Field: "", Problem: msg}
}
