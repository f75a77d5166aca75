package spec_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

func TestApprovalStepParses(t *testing.T) {
	t.Parallel()
	d, err := spec.Parse([]byte(`
name: web
targets: [a]
steps:
  - name: go-ahead
    kind: approval
    approvers: [alice, ci-bot]
    timeout: 2h
    on_timeout: approve
  - name: install
    command: ./install.sh
    on_failure: ask
    approvers: [alice]
`))
	require.NoError(t, err)
	gate := d.WithDefaults().Steps[0]
	require.True(t, gate.IsApproval())
	require.Equal(t, 2*time.Hour, gate.ApprovalTimeout())
	require.Equal(t, spec.OnTimeoutApprove, gate.TimeoutDecision())
	require.True(t, gate.MayDecide("alice"))
	require.False(t, gate.MayDecide("mallory"))
	require.Equal(t, "(approval)", gate.RecordedCommand())
	require.True(t, d.Steps[1].AsksOnFailure())
}

func TestApprovalDefaults(t *testing.T) {
	t.Parallel()
	d, err := spec.Parse([]byte(`{"name":"x","targets":["a"],"steps":[{"name":"ok","kind":"approval"}]}`))
	require.NoError(t, err)
	gate := d.WithDefaults().Steps[0]
	require.Equal(t, spec.DefaultApprovalTimeout, gate.ApprovalTimeout())
	require.Equal(t, spec.OnTimeoutReject, gate.TimeoutDecision())
	require.True(t, gate.MayDecide("anyone"), "no approvers: any deploy token decides")
}

func TestDecisionSpecRefusals(t *testing.T) {
	t.Parallel()
	cases := map[string]struct{ spec, field, problem string }{
		"ask with continue_on_error": {
			`{"name":"x","targets":["a"],"steps":[{"name":"s","command":"c","on_failure":"ask","continue_on_error":true}]}`,
			"steps[0].on_failure", "continue_on_error",
		},
		"approval with a command": {
			`{"name":"x","targets":["a"],"steps":[{"name":"s","kind":"approval","command":"c"}]}`,
			"steps[0].command", "runs no command",
		},
		"unknown kind": {
			`{"name":"x","targets":["a"],"steps":[{"name":"s","kind":"vote","command":"c"}]}`,
			"steps[0].kind", "command or approval",
		},
		"bad on_timeout": {
			`{"name":"x","targets":["a"],"steps":[{"name":"s","kind":"approval","on_timeout":"maybe"}]}`,
			"steps[0].on_timeout", "reject or approve",
		},
		"approval timeout too long": {
			`{"name":"x","targets":["a"],"steps":[{"name":"s","kind":"approval","timeout":"2000h"}]}`,
			"steps[0].timeout", "at most",
		},
		"bad approver": {
			`{"name":"x","targets":["a"],"steps":[{"name":"s","kind":"approval","approvers":["a b"]}]}`,
			"steps[0].approvers[0]", "token name",
		},
		"approvers on a plain step": {
			`{"name":"x","targets":["a"],"steps":[{"name":"s","command":"c","approvers":["a"]}]}`,
			"steps[0].approvers", "on_failure: ask",
		},
		"unknown on_failure": {
			`{"name":"x","targets":["a"],"steps":[{"name":"s","command":"c","on_failure":"retry"}]}`,
			"steps[0].on_failure", "must be ask",
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := spec.Parse([]byte(c.spec))
			requireProblem(t, err, c.field, c.problem)
		})
	}
}

// requireProblem fails unless err is spec.Errors with a problem at field containing
// text.
func requireProblem(t *testing.T, err error, field, text string) {
	t.Helper()
	var errs spec.Errors
	require.ErrorAs(t, err, &errs)
	for _, e := range errs {
		if e.Field == field {
			require.Contains(t, e.Problem, text)
			return
		}
	}
	require.Failf(t, "no problem at the field", "want %s, got %v", field, errs)
}
