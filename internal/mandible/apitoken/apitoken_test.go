package apitoken_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/mandible/apitoken"
)

func TestScopesIncludeTheWeakerOnes(t *testing.T) {
	t.Parallel()
	read, deploy, admin := apitoken.ScopeRead, apitoken.ScopeDeploy, apitoken.ScopeAdmin
	require.True(t, admin.Covers(deploy))
	require.True(t, admin.Covers(read))
	require.True(t, deploy.Covers(read))
	require.False(t, read.Covers(deploy))
	require.False(t, deploy.Covers(admin))
	require.False(t, apitoken.Scope("root").Covers(read))
	require.False(t, apitoken.Scope("").Valid())
}

func TestTokenFileInTOMLAndJSON(t *testing.T) {
	t.Parallel()
	toml := apitoken.FileLine("ci", apitoken.ScopeDeploy, "ci-secret") + apitoken.FileLine("ops", apitoken.ScopeAdmin, "ops-secret")
	json := `{"tokens": [{"name": "ci", "scope": "deploy", "sha256": "` + apitoken.HashHex("ci-secret") + `"},
		{"name": "ops", "scope": "admin", "sha256": "` + strings.ToUpper(apitoken.HashHex("ops-secret")) + `"}]}`
	array := `[{"name": "ci", "scope": "deploy", "sha256": "` + apitoken.HashHex("ci-secret") + `"},
		{"name": "ops", "scope": "admin", "sha256": "` + apitoken.HashHex("ops-secret") + `"}]`
	for name, content := range map[string]string{"tokens.toml": toml, "tokens.json": json, "array.json": array} {
		path := filepath.Join(t.TempDir(), name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		tokens, err := apitoken.LoadFile(path)
		require.NoError(t, err, name)
		keys := apitoken.NewKeyring(tokens)
		got, ok := keys.Lookup("ops-secret")
		require.True(t, ok, name)
		require.Equal(t, "ops", got.Name)
		require.Equal(t, apitoken.ScopeAdmin, got.Scope)
		_, ok = keys.Lookup(apitoken.HashHex("ops-secret"))
		require.False(t, ok, "%s: the hash is not the token", name)
		_, ok = keys.Lookup("")
		require.False(t, ok, name)
	}
}

func TestTokenFileProblemsNameTheirEntry(t *testing.T) {
	t.Parallel()
	_, err := apitoken.Parse([]byte(`
[[tokens]]
name = "bad name"
scope = "root"
sha256 = "abc"

[[tokens]]
name = "ci"
scope = "read"
sha256 = "` + apitoken.HashHex("x") + `"

[[tokens]]
name = "ci"
scope = "read"
sha256 = "` + apitoken.HashHex("x") + `"
`))
	require.Error(t, err)
	msg := err.Error()
	require.Contains(t, msg, `tokens[0].name: must be 1-64 letters`)
	require.Contains(t, msg, `tokens[0].scope: must be read, deploy or admin, got "root"`)
	require.Contains(t, msg, `tokens[0].sha256: must be the 64 hex digits`)
	require.Contains(t, msg, `tokens[2].name: "ci" names another token too`)
	require.Contains(t, msg, `tokens[2].sha256: the same token is listed twice`)

	_, err = apitoken.Parse([]byte(``))
	require.ErrorContains(t, err, "holds no tokens")
	_, err = apitoken.Parse([]byte("[[tokens]]\nname = \"a\"\nscope = \"read\"\nsha256 = \"" + apitoken.HashHex("a") + "\"\nsecret = \"a\"\n"))
	require.ErrorContains(t, err, "unknown key tokens.secret")
}

func TestKeyringReplaceTakesEffectAtOnce(t *testing.T) {
	t.Parallel()
	keys := apitoken.NewKeyring(apitoken.Legacy([]string{"old-0123456789abcdef"}))
	got, ok := keys.Lookup("old-0123456789abcdef")
	require.True(t, ok)
	require.Equal(t, apitoken.Token{Name: "legacy-1", Scope: apitoken.ScopeAdmin, SHA256: apitoken.Hash("old-0123456789abcdef")}, got)
	keys.Replace([]apitoken.Token{{Name: "new", Scope: apitoken.ScopeRead, SHA256: apitoken.Hash("new-secret")}})
	_, ok = keys.Lookup("old-0123456789abcdef")
	require.False(t, ok)
	_, ok = keys.Lookup("new-secret")
	require.True(t, ok)
	secret, err := apitoken.NewSecret()
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(secret, "mantis_"))
	require.GreaterOrEqual(t, len(secret), 40)
}
