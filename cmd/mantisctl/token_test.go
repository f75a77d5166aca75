package main

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
	"github.com/mantis-deploy/mantis/internal/mandible/httpapi"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// tokenFile writes apiToken to a private file and returns its path.
func tokenFile(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "token")
	require.NoError(t, os.WriteFile(path, []byte(apiToken+"\n"), 0o600))
	return path
}

// The token printed by `token create` and its entry, loaded as Mandible loads its
// token file, authenticate against the API with the scope asked for.
func TestTokenCreatePrintsATokenAndItsFileEntry(t *testing.T) {
	t.Parallel()
	out, err := runCLI(t, "token", "create", "--name", "ci", "--scope", "deploy")
	require.NoError(t, err)
	var secret string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "mantis_") {
			secret = line
		}
	}
	require.NotEmpty(t, secret, out)
	entry := out[strings.Index(out, "[[tokens]]"):]
	require.NotContains(t, entry, secret, "the file entry holds only the hash")
	tokens, err := apitoken.Parse([]byte(entry))
	require.NoError(t, err)
	require.Len(t, tokens, 1)
	got, ok := apitoken.NewKeyring(tokens).Lookup(secret)
	require.True(t, ok)
	require.Equal(t, "ci", got.Name)
	require.Equal(t, apitoken.ScopeDeploy, got.Scope)

	hashed, err := runCLIIn(t, secret+"\n", "token", "hash", "--name", "ci", "--scope", "deploy")
	require.NoError(t, err)
	require.Equal(t, entry, hashed)

	_, err = runCLI(t, "token", "create", "--name", "x", "--scope", "root")
	require.ErrorContains(t, err, `--scope: must be read, deploy or admin, got "root"`)
}

// mantisctl reads its token from --token-file or a token_file in its config, and
// refuses --token: the command line is visible to other users.
func TestClientTakesItsTokenFromAFile(t *testing.T) {
	t.Parallel()
	pool := testenv.MigratedPool(t)
	srv := httptest.NewServer(httpapi.New(httpapi.Options{DB: pool, Tokens: []string{apiToken}, HeartbeatTimeout: time.Hour}))
	t.Cleanup(srv.Close)

	out, err := runCLI(t, "requests", "--server", srv.URL, "--token-file", tokenFile(t), "--client-config", "")
	require.NoError(t, err, out)

	config := filepath.Join(t.TempDir(), "mantisctl.toml")
	require.NoError(t, os.WriteFile(config, []byte("server = \""+srv.URL+"\"\ntoken_file = \""+tokenFile(t)+"\"\n"), 0o600))
	out, err = runCLI(t, "requests", "--client-config", config, "--server", srv.URL)
	require.NoError(t, err, out)

	wrong := filepath.Join(t.TempDir(), "wrong")
	require.NoError(t, os.WriteFile(wrong, []byte("not-the-token-0123456789"), 0o600))
	_, err = runCLI(t, "requests", "--server", srv.URL, "--token-file", wrong, "--client-config", "")
	require.ErrorContains(t, err, "401")

	// A token on the command line is refused before any call, pointing to the ways
	// that keep it private, and the message does not repeat it.
	for _, args := range [][]string{{"--token", apiToken}, {"--token=" + apiToken}, {"--token", ""}} {
		out, err = runCLI(t, append([]string{"requests", "--server", srv.URL, "--client-config", ""}, args...)...)
		require.Error(t, err, "%v", args)
		require.Equal(t, ExitUsage, exitCodeOf(err, true), "%v: a usage error", args)
		require.ErrorContains(t, err, "--token is refused")
		require.ErrorContains(t, err, "--token-file")
		require.ErrorContains(t, err, "MANTIS_API_TOKEN")
		require.NotContains(t, err.Error()+out, apiToken)
	}

	_, err = runCLI(t, "requests", "--server", srv.URL, "--token-file", filepath.Join(t.TempDir(), "missing"), "--client-config", "")
	require.ErrorContains(t, err, "--token-file: reading the token")
}

// runCLIIn is runCLI with stdin.
func runCLIIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := newRootCommand()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetIn(strings.NewReader(stdin))
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}
