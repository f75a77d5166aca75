// Package spec defines the deployment specification users submit (YAML or JSON): what
// to run, where, in which order. It is plain data with validation, shared by the API,
// mantisctl and the Deployment workflow (whose input it is).
package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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
	Name    string `json:"name"`
	Command string `json:"command"`
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

// WithDefaults fills the defaults in: priority normal, step timeout 10 minutes.
func (d Deployment) WithDefaults() Deployment {
	if d.Priority == "" {
		d.Priority = DefaultPriority
	}
	steps := make([]Step, len(d.Steps))
	for i, s := range d.Steps {
		if s.Timeout == "" {
			s.Timeout = DefaultStepTimeout.String()
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
	var errs Errors
	add := func(field, format string, args ...any) {
		errs = append(errs, FieldError{Field: field, Problem: fmt.Sprintf(format, args...)})
	}
	if !namePattern.MatchString(d.Name) {
		add("name", "required: letters, digits, '.', '_' or '-', at most 128, got %q", d.Name)
	}
	switch d.Priority {
	case "", "high", "normal", "low":
	default:
		add("priority", "must be high, normal or low, got %q", d.Priority)
	}
	if len(d.Targets) == 0 && len(d.TargetSelector) == 0 {
		add("targets", "name at least one target, or give a target_selector")
	}
	if len(d.Targets) > MaxTargets {
		add("targets", "at most %d, got %d", MaxTargets, len(d.Targets))
	}
	seen := map[string]bool{}
	for i, t := range d.Targets {
		if !namePattern.MatchString(t) {
			add(fmt.Sprintf("targets[%d]", i), "not a valid target name: %q", t)
		} else if seen[t] {
			add(fmt.Sprintf("targets[%d]", i), "%q is listed twice", t)
		}
		seen[t] = true
	}
	// storable refuses text PostgreSQL cannot store (NUL, bytes that are not UTF-8)
	// and text longer than limit, naming the field.
	storable := func(field, v string, limit int) {
		if problem := safetext.Unstorable(v, limit); problem != "" {
			add(field, "%s", problem)
		}
	}
	for _, k := range sortedKeys(d.TargetSelector) {
		if k == "" {
			add("target_selector", "label keys must not be empty")
		}
		storable("target_selector."+k, k+d.TargetSelector[k], MaxLabelBytes)
	}
	storable("idempotency_key", d.IdempotencyKey, 200)
	if len(d.Steps) == 0 {
		add("steps", "at least one step is required")
	}
	if len(d.Steps) > MaxSteps {
		add("steps", "at most %d, got %d", MaxSteps, len(d.Steps))
	}
	names := map[string]bool{}
	for i, s := range d.Steps {
		at := fmt.Sprintf("steps[%d]", i)
		if !namePattern.MatchString(s.Name) {
			add(at+".name", "required: letters, digits, '.', '_' or '-', got %q", s.Name)
		} else if names[s.Name] {
			add(at+".name", "%q is used by an earlier step", s.Name)
		}
		names[s.Name] = true
		if strings.TrimSpace(s.Command) == "" {
			add(at+".command", "required")
		}
		storable(at+".command", s.Command, MaxCommandBytes)
		storable(at+".working_dir", s.WorkingDir, MaxWorkingDirBytes)
		if len(s.Env) > MaxEnvVars {
			add(at+".env", "at most %d variables, got %d", MaxEnvVars, len(s.Env))
		}
		if s.Timeout != "" {
			if t, err := time.ParseDuration(s.Timeout); err != nil || t <= 0 {
				add(at+".timeout", "must be a positive duration like \"90s\" or \"5m\", got %q", s.Timeout)
			} else if t > 24*time.Hour {
				add(at+".timeout", "at most 24h, got %s", t)
			}
		}
		for _, k := range sortedKeys(s.Env) {
			if !envKeyPattern.MatchString(k) {
				add(at+".env", "%q is not a valid environment variable name", k)
			} else {
				storable(at+".env."+k, s.Env[k], MaxEnvValueBytes)
			}
			if secretenv.IsSealed(s.Env[k]) {
				add(at+".env."+k, "a sealed secret belongs in env_secret")
			}
		}
		for _, p := range s.secretProblems(at) {
			add(p.Field, "%s", p.Problem)
		}
		if s.WorkingDir != "" && !strings.HasPrefix(s.WorkingDir, "/") {
			add(at+".working_dir", "must be an absolute path, got %q", s.WorkingDir)
		}
	}
	if d.MaxParallel < 0 {
		add("max_parallel", "must not be negative, got %d", d.MaxParallel)
	}
	if len(errs) > 0 {
		return errs
	}
	return nil
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
