package spec_test

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

func TestParseYAMLAndJSON(t *testing.T) {
	t.Parallel()
	y := `
name: web-release
priority: high
targets: [web-1, web-2]
max_parallel: 1
steps:
  - name: fetch
    command: echo fetch
    timeout: 30s
  - name: restart
    command: systemctl restart web
    continue_on_error: true
    env: {APP_ENV: prod}
    working_dir: /srv
`
	d, err := spec.Parse([]byte(y))
	require.NoError(t, err)
	require.Equal(t, "web-release", d.Name)
	require.Len(t, d.Steps, 2)
	require.True(t, d.Steps[1].ContinueOnError)
	d = d.WithDefaults()
	require.Equal(t, "10m0s", d.Steps[1].Timeout)

	j := `{"name":"x","targets":["a"],"steps":[{"name":"s","command":"true"}]}`
	d, err = spec.Parse([]byte(j))
	require.NoError(t, err)
	require.Equal(t, "normal", d.WithDefaults().Priority)
}

func TestEveryProblemIsReportedWithItsFieldPath(t *testing.T) {
	t.Parallel()
	y := `
name: "bad name"
priority: urgent
targets: [web-1, web-1, "no spaces"]
max_parallel: -1
steps:
  - name: a
    command: ""
    timeout: soon
  - name: a
    command: ok
    timeout: 48h
    env: {"1BAD": x}
    working_dir: relative/path
`
	_, err := spec.Parse([]byte(y))
	var errs spec.Errors
	require.ErrorAs(t, err, &errs)
	fields := map[string]string{}
	for _, e := range errs {
		fields[e.Field] = e.Problem
	}
	for _, f := range []string{"name", "priority", "targets[1]", "targets[2]", "max_parallel", "steps[0].command",
		"steps[0].timeout", "steps[1].name", "steps[1].timeout", "steps[1].env", "steps[1].working_dir"} {
		require.Contains(t, fields, f, "problems: %v", fields)
	}
}

func TestParseRefusesUnknownFieldsAndEmptySpecs(t *testing.T) {
	t.Parallel()
	_, err := spec.Parse([]byte(`{"name":"x","targets":["a"],"steps":[{"name":"s","command":"true"}],"stpes":[]}`))
	require.ErrorContains(t, err, "stpes: unknown field")
	_, err = spec.Parse([]byte("  "))
	require.ErrorContains(t, err, "the spec is empty")
	_, err = spec.Parse([]byte("name: [unclosed"))
	require.ErrorContains(t, err, "not valid YAML or JSON")
	_, err = spec.Parse([]byte(`{"name":"x","targets":"a","steps":[]}`))
	require.ErrorContains(t, err, "targets")
}

func TestShippedExampleSpecsParse(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../../../deploy/examples/release.yaml")
	require.NoError(t, err)
	d, err := spec.Parse(b)
	require.NoError(t, err)
	require.Len(t, d.Steps, 3)

	for file, check := range map[string]func(d spec.Deployment){
		"rolling.yaml": func(d spec.Deployment) {
			require.Equal(t, []int{1, 2, 10, 7}, spec.SplitBatches(20, d.Rollout.Batches))
			budget, ok := d.Rollout.FailureBudget(20)
			require.True(t, ok)
			require.Equal(t, 5, budget)
		},
		"canary.yaml": func(d spec.Deployment) {
			require.Equal(t, 3, d.Rollout.Canary.Checks())
			require.Len(t, d.OnFailure, 1)
		},
		"approval-batches.yaml": func(d spec.Deployment) {
			require.Equal(t, spec.PauseApproval, d.Steps[0].Rollout.PauseBetween)
		},
	} {
		b, err := os.ReadFile("../../../deploy/examples/" + file)
		require.NoError(t, err)
		d, err := spec.Parse(b)
		require.NoError(t, err, file)
		check(d)
	}
}

// Text PostgreSQL cannot store, and text past its bound, is refused by field before
// anything is written, rather than failing the insert.
func TestUnstorableAndOversizedTextIsRefusedByField(t *testing.T) {
	t.Parallel()
	j := `{"name":"rel","targets":["web-1"],"target_selector":{"role":"a\u0000b"},"idempotency_key":"k\u0000",
	  "steps":[{"name":"a","command":"echo a\u0000b","working_dir":"/srv/\u0000","env":{"TOKEN":"x\u0000y","BIG":"` +
		strings.Repeat("v", spec.MaxEnvValueBytes+1) + `"}},
	  {"name":"b","command":"` + strings.Repeat("c", spec.MaxCommandBytes+1) + `"}]}`
	_, err := spec.Parse([]byte(j))
	var errs spec.Errors
	require.ErrorAs(t, err, &errs)
	fields := map[string]string{}
	for _, e := range errs {
		fields[e.Field] = e.Problem
	}
	for f, want := range map[string]string{
		"target_selector.role": "NUL", "idempotency_key": "NUL", "steps[0].command": "NUL",
		"steps[0].working_dir": "NUL", "steps[0].env.TOKEN": "NUL", "steps[0].env.BIG": "at most",
		"steps[1].command": "at most",
	} {
		require.Contains(t, fields[f], want, "field %s; problems: %v", f, fields)
	}
}

func TestCommandDefaultsFillOnlyWhatIsUnset(t *testing.T) {
	t.Parallel()
	priority, timeout := spec.CommandDefaults("", 0)
	require.Equal(t, spec.DefaultPriority, priority)
	require.Equal(t, spec.DefaultStepTimeout, timeout)
	priority, timeout = spec.CommandDefaults("high", 90*time.Second)
	require.Equal(t, "high", priority)
	require.Equal(t, 90*time.Second, timeout)

	d := spec.Deployment{Steps: []spec.Step{{Name: "a"}, {Name: "b", Timeout: "5m"}}}.WithDefaults()
	require.Equal(t, spec.DefaultPriority, d.Priority)
	require.Equal(t, spec.DefaultStepTimeout, d.Steps[0].TimeoutDuration())
	require.Equal(t, "10m0s", d.Steps[0].Timeout)
	require.Equal(t, "5m", d.Steps[1].Timeout)
}
