package spec_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

// The recorded steps are the spec's, then its rollback steps, then a verify step per
// step with a canary, at the positions the workflow looks them up by.
func TestRecordedStepsPlaceRollbackAndVerifyStepsAfterTheSpecs(t *testing.T) {
	t.Parallel()
	canary := &spec.Rollout{Canary: &spec.Canary{Verify: "true"}}
	d := spec.Deployment{Name: "d", Targets: []string{"a"}, Rollout: canary,
		Steps:     []spec.Step{{Name: "one", Command: "x"}, {Name: "ok", Kind: spec.StepKindApproval}, {Name: "two", Command: "y", Rollout: &spec.Rollout{}}},
		OnFailure: []spec.Step{{Name: "undo", Command: "z"}}}.WithDefaults()
	var names []string
	for _, s := range d.RecordedSteps() {
		names = append(names, s.Name)
	}
	require.Equal(t, []string{"one", "ok", "two", "rollback: undo", "verify: one"}, names,
		"an approval step has no rollout, and a step's own rollout without a canary overrides the deployment's")
	require.Equal(t, 3, d.RollbackPosition(0))
	pos, ok := d.VerifyPosition(0)
	require.True(t, ok)
	require.Equal(t, 4, pos)
	_, ok = d.VerifyPosition(2)
	require.False(t, ok)
	require.True(t, d.RecordedSteps()[3].ContinueOnError, "a rollback step runs on every target whatever the others did")
}

// The verify command runs the check healthy_checks times, spaced over the window,
// and stops at the first failure with its exit code.
func TestVerifyCommandRunsEachCheckAndStopsAtTheFirstFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	count := filepath.Join(dir, "count")
	c := spec.Canary{Verify: "echo x >> " + count + "; test $(wc -l < " + count + ") -lt 3", HealthyChecks: 4, HealthyWindow: "3s"}
	require.Equal(t, time.Second, c.Interval())
	out, err := exec.Command("/bin/sh", "-c", c.VerifyCommand()).CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "%s", out)
	require.Equal(t, 1, exit.ExitCode())
	b, err := os.ReadFile(count)
	require.NoError(t, err)
	require.Equal(t, 3, strings.Count(string(b), "x"), "the third check failed and no fourth ran")
	require.Contains(t, string(out), "mantis: health check 3 of 4")

	c = spec.Canary{Verify: "true", HealthyChecks: 2}
	out, err = exec.Command("/bin/sh", "-c", c.VerifyCommand()).CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Equal(t, "true", spec.Canary{Verify: "true"}.VerifyCommand(), "one check is the command itself")
}
