package spec_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/spec"
	"github.com/mantis-deploy/mantis/internal/secretenv"
)

// env_secret is checked field by field, and no refusal repeats a secret's value.
func TestEnvSecretProblemsNameTheirFieldAndNeverTheValue(t *testing.T) {
	t.Parallel()
	_, err := spec.Parse([]byte(`{"name":"d","targets":["a"],"steps":[{"name":"s","command":"true",
		"env":{"BOTH":"x","SEALED":"mantis-secret:v1:k:abc"},
		"env_secret":{"BOTH":"s3cret-a","REL":"file:etc/passwd-s3cret","OWN":"env:DATABASE_URL","bad-name":"s3cret-b","OK":"s3cret-c"}}]}`))
	var errs spec.Errors
	require.ErrorAs(t, err, &errs)
	got := map[string]string{}
	for _, e := range errs {
		got[e.Field] = e.Problem
	}
	require.Contains(t, got, "steps[0].env_secret.BOTH")
	require.Contains(t, got, "steps[0].env_secret.REL")
	require.Contains(t, got["steps[0].env_secret.OWN"], secretenv.EnvRefNamePrefix)
	require.Contains(t, got["steps[0].env_secret"], "bad-name")
	require.Contains(t, got, "steps[0].env.SEALED", "a sealed value is refused in plain env")
	require.NotContains(t, got, "steps[0].env_secret.OK")
	require.False(t, strings.Contains(err.Error(), "s3cret"), err.Error())
}

// SealSecrets seals every value not sealed yet and RedactSecrets hides them all; the
// spec itself is left alone.
func TestSealAndRedactSecrets(t *testing.T) {
	t.Parallel()
	d := spec.Deployment{Name: "d", Targets: []string{"a"}, Steps: []spec.Step{{Name: "s", Command: "true",
		Env: map[string]string{"PLAIN": "p"}, EnvSecret: map[string]string{"TOKEN": "s3cret", "DONE": secretenv.Prefix + "k:x"}}}}
	sealed, err := d.SealSecrets(func(name, v string) (string, error) { return secretenv.Prefix + "k:" + name, nil })
	require.NoError(t, err)
	require.Equal(t, secretenv.Prefix+"k:TOKEN", sealed.Steps[0].EnvSecret["TOKEN"])
	require.Equal(t, secretenv.Prefix+"k:x", sealed.Steps[0].EnvSecret["DONE"], "sealed values stay as they are")
	require.Equal(t, "s3cret", d.Steps[0].EnvSecret["TOKEN"], "d is not changed")
	require.NoError(t, sealed.Validate())
	require.Equal(t, map[string]string{"PLAIN": "p", "TOKEN": secretenv.Prefix + "k:TOKEN", "DONE": secretenv.Prefix + "k:x"}, sealed.Steps[0].CommandEnv())

	red := d.RedactSecrets()
	require.Equal(t, map[string]string{"TOKEN": secretenv.Redacted, "DONE": secretenv.Redacted}, red.Steps[0].EnvSecret)
	require.Equal(t, "p", red.Steps[0].Env["PLAIN"])
}
