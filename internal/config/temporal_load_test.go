package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

// The [temporal] section loads alone: the other sections' requirements (a database
// URL, token and listener files) are not checked, the section's own are, naming their
// keys, and its secret file and the environment apply as for Mandible.
func TestLoadMandibleTemporalChecksOnlyItsSection(t *testing.T) {
	t.Parallel()
	key := writeFile(t, "api-key", "k-123\n")
	path := writeFile(t, "mandible.toml", "replica_id = \"r1\"\n[database]\nmax_conns = 4\n[temporal]\naddress = \"temporal.example:7233\"\napi_key_file = \""+key+"\"\n")
	_, err := config.LoadMandible(path, nil)
	require.ErrorContains(t, err, "database.url", "the whole configuration is not valid")
	env := map[string]string{"MANTIS_TEMPORAL_NAMESPACE": "prod"}
	tc, err := config.LoadMandibleTemporal(path, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	require.NoError(t, err)
	require.Equal(t, "temporal.example:7233", tc.Address)
	require.Equal(t, "prod", tc.Namespace)
	require.Equal(t, "k-123", tc.APIKey)
	require.Equal(t, "mantis-deployments", tc.DeploymentTaskQueue)

	path = writeFile(t, "bad.toml", "[temporal]\naddress = \"nohost\"\nsearch_attributes_wait = \"0s\"\napi_key_file = \"/nonexistent\"\n")
	_, err = config.LoadMandibleTemporal(path, nil)
	require.ElementsMatch(t, []string{
		"temporal.api_key_file: reading the secret of temporal.api_key: open /nonexistent: no such file or directory",
		"temporal.address: must be host:port, got \"nohost\"",
		"temporal.search_attributes_wait: must be positive, got 0s",
	}, problems(t, err))
}
