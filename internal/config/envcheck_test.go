package config

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestUnknownEnvNamesTyposAndOtherDaemonsKeys(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin",
		"MANTIS_DATABASE_URL=postgres://x",        // Mandible's own key
		"MANTIS_DATABSE_URL=postgres://x",         // a typo
		"MANTIS_AGENTS_LISTEN=0.0.0.0:9190",       // Thorax's key
		"MANTIS_SECRET_DEPLOY_KEY=s3cret",         // read by env_secret references
		"MANTIS_API_TOKEN=t",                      // mantisctl's
		"MANTIS_TEST_STACK_ENV=/tmp/stack.env",    // the test suite's
		"MANTIS_HEALTHCHECK_URL=http://x/healthz", // the image's health check
	}
	require.Equal(t, []string{
		"MANTIS_AGENTS_LISTEN is not a configuration variable of this process (thorax reads it)",
		"MANTIS_DATABSE_URL is not a configuration variable of this process",
	}, UnknownEnv(DefaultMandible(), environ))

	require.Equal(t, []string{
		"MANTIS_DATABASE_URL is not a configuration variable of this process (mandible reads it)",
		"MANTIS_DATABSE_URL is not a configuration variable of this process",
	}, UnknownEnv(DefaultThorax(), environ))
}

// Every variable a daemon's keys read is known to it: none is reported for an
// environment that sets every key of its own configuration.
func TestUnknownEnvKnowsEveryKey(t *testing.T) {
	for name, cfg := range daemonConfigs {
		var environ []string
		for env := range envNames(cfg()) {
			environ = append(environ, env+"=x")
		}
		require.NotEmpty(t, environ, name)
		require.Empty(t, UnknownEnv(cfg(), environ), name)
	}
}
