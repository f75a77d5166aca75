package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// The create answer's warnings (a secret too short to mask) are printed on stderr,
// naming the field, and stdout stays the answer alone.
func TestDeployPrintsTheCreateWarnings(t *testing.T) {
	t.Parallel()
	fake, url := newFakeAPI(t, "running")
	fake.warnings = []api.FieldWarning{{Field: "steps[0].env_secret.PIN", Warning: "shorter than 4 bytes: not masked in output"}}
	spec := filepath.Join(t.TempDir(), "spec.yaml")
	require.NoError(t, os.WriteFile(spec, []byte("name: release\ntargets: [web-1]\nsteps:\n- name: s\n  command: 'true'\n  env_secret: {PIN: '123'}\n"), 0o600))

	r := mantisctl(t, against(t, url, "deploy", "-f", spec)...)
	requireCode(t, ExitOK, r)
	require.Contains(t, r.stderr, "warning: steps[0].env_secret.PIN: shorter than 4 bytes: not masked in output\n")
	require.NotContains(t, r.stdout, "warning")

	r = mantisctl(t, against(t, url, "deploy", "-f", spec, "-o", "json")...)
	requireCode(t, ExitOK, r)
	require.Contains(t, r.stderr, "warning: steps[0].env_secret.PIN")
}
