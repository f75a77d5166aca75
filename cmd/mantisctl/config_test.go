package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/contract/api"
)

// namedServer answers every list of targets with one target named name, so a test
// sees which server a command reached, and counts the bearer tokens it got.
func namedServer(t *testing.T, name string, token string, wrongToken *atomic.Int32) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			wrongToken.Add(1)
			api.WriteError(w, r, http.StatusUnauthorized, api.CodeUnauthenticated, "unknown token")
			return
		}
		api.WriteJSON(w, http.StatusOK, api.TargetList{Targets: []api.Target{{Name: name, Mode: "poll"}}})
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func writeClientConfig(t *testing.T, dir, content string) string {
	t.Helper()
	path := filepath.Join(dir, "mantisctl.toml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestContextsPickTheServerAndToken(t *testing.T) {
	t.Setenv(envServer, "")
	t.Setenv(envToken, "")
	t.Setenv(envContext, "")
	var wrong atomic.Int32
	staging := namedServer(t, "from-staging", "staging-token", &wrong)
	prod := namedServer(t, "from-prod", "prod-token", &wrong)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "staging.token"), []byte("staging-token\n"), 0o600))
	cfg := writeClientConfig(t, dir, `# contexts of the test
current-context = "staging"
server = "http://127.0.0.1:1"

[contexts.staging]
server = "`+staging+`"
token_file = "`+filepath.Join(dir, "staging.token")+`"

[contexts.prod]
server = "`+prod+`"
token = "prod-token"
`)
	targets := func(args ...string) result {
		return mantisctl(t, append([]string{"targets", "--client-config", cfg}, args...)...)
	}
	r := targets()
	requireCode(t, ExitOK, r)
	require.Contains(t, r.stdout, "from-staging", "current-context is used")

	r = targets("--context", "prod")
	requireCode(t, ExitOK, r)
	require.Contains(t, r.stdout, "from-prod")

	t.Setenv(envContext, "prod")
	require.Contains(t, targets().stdout, "from-prod", envContext+" picks a context")
	t.Setenv(envContext, "")

	// Flags and the environment still win over the file.
	r = targets("--server", prod, "--token-file", writeToken(t, "prod-token"))
	require.Contains(t, r.stdout, "from-prod")
	t.Setenv(envServer, prod)
	t.Setenv(envToken, "prod-token")
	require.Contains(t, targets().stdout, "from-prod")
	t.Setenv(envServer, "")
	t.Setenv(envToken, "")
	require.Zero(t, wrong.Load(), "no server got another's token")

	r = targets("--context", "nope")
	requireCode(t, ExitUsage, r)
	require.Contains(t, r.stderr, `context "nope": not in`)
	require.Contains(t, r.stderr, "prod, staging")

	// use-context edits only the current-context line.
	r = mantisctl(t, "config", "use-context", "prod", "--client-config", cfg)
	requireCode(t, ExitOK, r)
	require.Contains(t, targets().stdout, "from-prod")
	data, err := os.ReadFile(cfg)
	require.NoError(t, err)
	require.Contains(t, string(data), "# contexts of the test\ncurrent-context = \"prod\"\nserver = ")
	st, err := os.Stat(cfg)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file stays private")
	requireCode(t, ExitUsage, mantisctl(t, "config", "use-context", "nope", "--client-config", cfg))

	r = mantisctl(t, "config", "get-contexts", "--client-config", cfg)
	requireCode(t, ExitOK, r)
	require.Regexp(t, `(?m)^\*\s+prod\s+`+prod, r.stdout)
	require.Regexp(t, `(?m)^\s+staging\s+`+staging, r.stdout)
	require.NotContains(t, r.stdout, "prod-token")

	r = mantisctl(t, "config", "get-contexts", "-o", "json", "--client-config", cfg)
	requireCode(t, ExitOK, r)
	require.NotContains(t, r.stdout, "prod-token", "a token is never printed")
	require.Contains(t, r.stdout, `"current": true`)

	r = mantisctl(t, "config", "current-context", "--client-config", cfg)
	require.Equal(t, "prod\n", r.stdout)
}

// A file with no current-context line gets one, before its first table.
func TestUseContextAddsTheLine(t *testing.T) {
	t.Parallel()
	cfg := writeClientConfig(t, t.TempDir(), "[contexts.a]\nserver = \"http://a\"\n")
	requireCode(t, ExitOK, mantisctl(t, "config", "use-context", "a", "--client-config", cfg))
	data, err := os.ReadFile(cfg)
	require.NoError(t, err)
	require.Equal(t, "current-context = \"a\"\n[contexts.a]\nserver = \"http://a\"\n", string(data))
	file, err := loadClientFile(cfg)
	require.NoError(t, err)
	require.Equal(t, "a", file.CurrentContext)
}

// The top-level keys of a file without contexts work as before.
func TestConfigWithoutContextsUsesTopLevelKeys(t *testing.T) {
	t.Setenv(envServer, "")
	t.Setenv(envToken, "")
	t.Setenv(envContext, "")
	var wrong atomic.Int32
	url := namedServer(t, "only", "t0ken", &wrong)
	cfg := writeClientConfig(t, t.TempDir(), "server = \""+url+"\"\ntoken = \"t0ken\"\n")
	r := mantisctl(t, "targets", "--client-config", cfg)
	requireCode(t, ExitOK, r)
	require.Contains(t, r.stdout, "only")

	bad := writeClientConfig(t, t.TempDir(), "current_context = \"x\"\n")
	r = mantisctl(t, "targets", "--client-config", bad)
	requireCode(t, ExitUsage, r)
	require.Contains(t, r.stderr, "unknown key current_context")
}
