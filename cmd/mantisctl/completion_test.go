package main

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// Target names complete from the real API; cobra's completion command writes the
// shell scripts that call it.
func TestCompletionOfTargetNames(t *testing.T) {
	url := apiServer(t)
	for _, name := range []string{"web-1", "web-2", "db-1"} {
		_, err := runCLI(t, against(t, url, "targets", "register", name, "--mode", "poll")...)
		require.NoError(t, err)
	}
	r := mantisctl(t, append(against(t, url, "__complete"), "targets", "deregister", "we")...)
	requireCode(t, ExitOK, r)
	require.Contains(t, r.stdout, "web-1\tpoll\n")
	require.Contains(t, r.stdout, "web-2\tpoll\n")
	require.NotContains(t, r.stdout, "db-1")

	r = mantisctl(t, append(against(t, url, "__complete"), "run", "--targets", "web-1,d")...)
	requireCode(t, ExitOK, r)
	require.Contains(t, r.stdout, "web-1,db-1\tpoll\n")

	for _, shell := range []string{"bash", "zsh", "fish"} {
		r = mantisctl(t, "completion", shell)
		requireCode(t, ExitOK, r)
		require.Contains(t, r.stdout, "mantisctl")
	}
}

// Deployment ids complete with their name and state.
func TestCompletionOfDeploymentIDs(t *testing.T) {
	t.Parallel()
	fake, url := newFakeAPI(t, "running")
	id := fake.deployment.ID.String()
	for _, cmd := range []string{"get", "watch", "cancel"} {
		r := mantisctl(t, append(against(t, url, "__complete"), cmd, id[:4])...)
		requireCode(t, ExitOK, r)
		require.Contains(t, r.stdout, id+"\trelease running\n", cmd)
	}
}
