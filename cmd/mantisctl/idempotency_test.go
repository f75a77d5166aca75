package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/events"
	"github.com/mantis-deploy/mantis/internal/contract/spec"
)

func envOf(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestCIJobIdentityOfEachCI(t *testing.T) {
	t.Parallel()
	for want, vars := range map[string]map[string]string{
		"github-123-2-build":  {"GITHUB_RUN_ID": "123", "GITHUB_RUN_ATTEMPT": "2", "GITHUB_JOB": "build"},
		"gitlab-77-901":       {"CI_PIPELINE_ID": "77", "CI_JOB_ID": "901"},
		"buildkite-b1-j2":     {"BUILDKITE_BUILD_ID": "b1", "BUILDKITE_JOB_ID": "j2"},
		"jenkins-jenkins-x-5": {"BUILD_TAG": "jenkins-x-5"},
		"":                    {"CI": "true"},
	} {
		require.Equal(t, want, ciJobIdentity(envOf(vars)))
	}
}

func TestDefaultIdempotencyKeyNamesTheJobAndTheRun(t *testing.T) {
	t.Parallel()
	gh := envOf(map[string]string{"GITHUB_RUN_ID": "123", "GITHUB_RUN_ATTEMPT": "1", "GITHUB_JOB": "deploy"})
	run := func(name, command string) spec.Deployment {
		return spec.Deployment{Name: name, Targets: []string{"web-1"}, Steps: []spec.Step{{Name: "run", Command: command, Timeout: "10m0s"}}}
	}
	key := defaultIdempotencyKey(gh, run("run-20260101-000000", "uptime"))
	require.Regexp(t, `^github-123-1-deploy-run-[0-9a-f]{16}$`, key)
	require.Equal(t, key, defaultIdempotencyKey(gh, run("run-20260101-000105", "uptime")), "a retry a minute later is the same run")
	require.NotEqual(t, key, defaultIdempotencyKey(gh, run("run-20260101-000000", "df -h")), "another command of the job is another run")
	require.Empty(t, defaultIdempotencyKey(envOf(nil), run("r", "uptime")), "no key outside CI")

	long := envOf(map[string]string{"BUILD_TAG": string(make([]byte, 300))})
	require.LessOrEqual(t, len(defaultIdempotencyKey(long, run("r", "uptime"))), maxIdempotencyKey)
}

// run sends its key as the Idempotency-Key header and in the spec; in CI without
// --idempotency-key it derives one, and --idempotency-key ” sends none.
func TestRunSendsTheIdempotencyKey(t *testing.T) {
	fake, url := newFakeAPI(t, "running", events.StepStarted, events.TargetRunning, events.TargetSucceeded, events.DeploymentSucceeded)
	requireCode(t, ExitOK, mantisctl(t, against(t, url, "run", "--targets", "web-1", "--idempotency-key", "release-42", "--", "uptime")...))

	t.Setenv("GITHUB_RUN_ID", "555")
	t.Setenv("GITHUB_RUN_ATTEMPT", "1")
	t.Setenv("GITHUB_JOB", "deploy")
	requireCode(t, ExitOK, mantisctl(t, against(t, url, "run", "--targets", "web-1", "--", "uptime")...))
	requireCode(t, ExitOK, mantisctl(t, against(t, url, "run", "--targets", "web-1", "--idempotency-key", "", "--", "uptime")...))

	calls := fake.calls()
	require.Len(t, calls, 3)
	require.Equal(t, "release-42", calls[0].header)
	require.Equal(t, "release-42", calls[0].body["idempotency_key"])
	require.Regexp(t, `^github-555-1-deploy-run-`, calls[1].header)
	require.Equal(t, calls[1].header, calls[1].body["idempotency_key"])
	require.Empty(t, calls[2].header)
	require.NotContains(t, calls[2].body, "idempotency_key")
}
