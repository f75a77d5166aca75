package spec_test

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

func TestSplitBatches(t *testing.T) {
	t.Parallel()
	pct := func(p float64) spec.BatchSize { return spec.BatchSize{Percent: p} }
	n := func(c int) spec.BatchSize { return spec.BatchSize{Count: c} }
	cases := []struct {
		name  string
		n     int
		sizes []spec.BatchSize
		want  []int
	}{
		{"no sizes: one batch", 7, nil, []int{7}},
		{"no targets", 0, []spec.BatchSize{n(1)}, nil},
		{"ansible serial list", 20, []spec.BatchSize{n(1), pct(10), pct(50), pct(100)}, []int{1, 2, 10, 7}},
		{"last size repeats", 10, []spec.BatchSize{n(3)}, []int{3, 3, 3, 1}},
		{"percent rounds down but never to zero", 3, []spec.BatchSize{pct(10)}, []int{1, 1, 1}},
		{"a size over what is left is cut", 4, []spec.BatchSize{n(1), n(10)}, []int{1, 3}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got := spec.SplitBatches(c.n, c.sizes)
			require.Equal(t, c.want, got)
			sum := 0
			for _, b := range got {
				sum += b
			}
			require.Equal(t, max(c.n, 0), sum)
		})
	}
}

func TestRolloutParsesAndRoundTrips(t *testing.T) {
	t.Parallel()
	d, err := spec.Parse([]byte(`
name: web
targets: [a]
rollout:
  batches: [1, "10%", "50%", "100%"]
  pause_between: approval
  max_failures: 5
  max_failure_percent: 2.5
  on_budget_exceeded: cancel
  canary: {verify: "curl -fsS localhost/health", verify_on: web-1, healthy_checks: 3, healthy_window: 30s}
steps:
  - name: s
    command: c
    rollout: {batches: ["25%"], pause_between: 30s}
on_failure:
  - name: rollback
    command: ./rollback.sh
`))
	require.NoError(t, err)
	require.Equal(t, []spec.BatchSize{{Count: 1}, {Percent: 10}, {Percent: 50}, {Percent: 100}}, d.Rollout.Batches)
	budget, ok := d.Rollout.FailureBudget(400)
	require.True(t, ok)
	require.Equal(t, 5, budget, "the smaller of max_failures and max_failure_percent holds")
	budget, _ = d.Rollout.FailureBudget(100)
	require.Equal(t, 2, budget)
	js, err := json.Marshal(d)
	require.NoError(t, err)
	require.Contains(t, string(js), `"batches":[1,"10%","50%","100%"]`)
	again, err := spec.Parse(js)
	require.NoError(t, err)
	require.Equal(t, d, again)
	_, ok = spec.Rollout{}.FailureBudget(10)
	require.False(t, ok)
}

func TestRolloutRefusals(t *testing.T) {
	t.Parallel()
	base := `{"name":"x","targets":["a"],"steps":[{"name":"s","command":"c"}],`
	cases := map[string]struct{ tail, field, problem string }{
		"zero batch":       {`"rollout":{"batches":[0]}}`, "rollout.batches[0]", "at least one"},
		"percent over 100": {`"rollout":{"batches":["150%"]}}`, "rollout.batches[0]", "at most 100"},
		"bad batch text":   {`"rollout":{"batches":["ten"]}}`, "rollout.batches", "whole number or a percent like \"10%\", got \"ten\""},
		"bad pause":        {`"rollout":{"pause_between":"soon"}}`, "rollout.pause_between", "approval"},
		"negative budget":  {`"rollout":{"max_failures":-1}}`, "rollout.max_failures", "negative"},
		"bad percent":      {`"rollout":{"max_failure_percent":101}}`, "rollout.max_failure_percent", "between 0 and 100"},
		"bad on_budget":    {`"rollout":{"on_budget_exceeded":"panic"}}`, "rollout.on_budget_exceeded", "finish or cancel"},
		"canary no verify": {`"rollout":{"canary":{"healthy_checks":2}}}`, "rollout.canary.verify", "required"},
		"rollback asks":    {`"on_failure":[{"name":"r","command":"c","on_failure":"ask"}]}`, "on_failure[0]", "plain command step"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			_, err := spec.Parse([]byte(base + c.tail))
			require.Error(t, err)
			if c.field == "" {
				require.Contains(t, err.Error(), c.problem)
				return
			}
			requireProblem(t, err, c.field, c.problem)
		})
	}
}
