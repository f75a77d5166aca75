package secretenv_test

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/codec"
	"github.com/mantis-deploy/mantis/internal/secretenv"
)

func newKey(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, codec.KeySize)
	_, err := rand.Read(k)
	require.NoError(t, err)
	return k
}

// A sealed secret holds no plain text, opens for its own deployment and name only,
// and still opens after the keyring rotated to a new current key.
func TestSealedSecretOpensOnlyWhereItWasSealedForAndAcrossRotation(t *testing.T) {
	t.Parallel()
	k1 := newKey(t)
	old, err := codec.New("k1", map[string][]byte{"k1": k1})
	require.NoError(t, err)
	sealed, err := secretenv.Seal(old, "dep-1", "TOKEN", "s3cret")
	require.NoError(t, err)
	require.True(t, secretenv.IsSealed(sealed))
	require.True(t, strings.HasPrefix(sealed, secretenv.Prefix+"k1:"), sealed)
	require.NotContains(t, sealed, "s3cret")

	rotated, err := codec.New("k2", map[string][]byte{"k1": k1, "k2": newKey(t)})
	require.NoError(t, err)
	got, err := secretenv.Open(rotated, "dep-1", "TOKEN", sealed)
	require.NoError(t, err)
	require.Equal(t, "s3cret", got)

	_, err = secretenv.Open(rotated, "dep-2", "TOKEN", sealed)
	require.ErrorContains(t, err, "another deployment or variable")
	_, err = secretenv.Open(rotated, "dep-1", "OTHER", sealed)
	require.ErrorContains(t, err, "another deployment or variable")
	require.NotContains(t, err.Error(), "s3cret")

	lost, err := codec.New("k3", map[string][]byte{"k3": newKey(t)})
	require.NoError(t, err)
	_, err = secretenv.Open(lost, "dep-1", "TOKEN", sealed)
	require.ErrorIs(t, err, codec.ErrUnknownKey)

	_, err = secretenv.Seal(nil, "dep-1", "TOKEN", "s3cret")
	require.ErrorIs(t, err, secretenv.ErrNoKeyring)
}

// OpenEnv opens and resolves the sealed values of a command's env (literal, file: and
// env: references) and leaves the plain ones alone; Redact hides the sealed ones.
func TestOpenEnvResolvesReferencesAndRedactHidesSealedValues(t *testing.T) {
	t.Parallel()
	c, err := codec.New("k1", map[string][]byte{"k1": newKey(t)})
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "db"), []byte("f1le\n"), 0o600))
	seal := func(name, v string) string {
		s, err := secretenv.Seal(c, "dep", name, v)
		require.NoError(t, err)
		return s
	}
	env := map[string]string{
		"PLAIN": "visible", "LIT": seal("LIT", "s3cret"), "FILE": seal("FILE", "file:"+filepath.Join(dir, "db")),
		"FROMENV": seal("FROMENV", "env:MANTIS_SECRET_X"), "ESC": seal("ESC", "value:file:not-a-ref"),
	}
	r := secretenv.Resolver{FilesDir: dir, LookupEnv: func(n string) (string, bool) {
		return map[string]string{"MANTIS_SECRET_X": "envval"}[n], n == "MANTIS_SECRET_X"
	}}
	got, err := secretenv.OpenEnv(c, r, "dep", env)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"PLAIN": "visible", "LIT": "s3cret", "FILE": "f1le", "FROMENV": "envval", "ESC": "file:not-a-ref"}, got)
	require.True(t, secretenv.IsSealed(env["LIT"]), "the command's env is not changed in place")

	red := secretenv.Redact(env)
	require.Equal(t, "visible", red["PLAIN"])
	for _, k := range []string{"LIT", "FILE", "FROMENV", "ESC"} {
		require.Equal(t, secretenv.Redacted, red[k])
	}
}

// A reference to a file outside secrets.files_dir, or to a variable that is not
// MANTIS_SECRET_*, is refused: a deployment cannot read Mandible's own files or settings.
func TestResolverRefusesReferencesOutsideWhatIsAllowed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	outside := filepath.Join(t.TempDir(), "key")
	require.NoError(t, os.WriteFile(outside, []byte("codec key"), 0o600))
	require.NoError(t, os.Symlink(outside, filepath.Join(dir, "link")))
	r := secretenv.Resolver{FilesDir: dir, LookupEnv: func(string) (string, bool) { return "postgres://x", true }}

	_, err := r.Resolve("A", "file:"+outside)
	require.ErrorContains(t, err, "not under secrets.files_dir")
	_, err = r.Resolve("A", "file:"+filepath.Join(dir, "link"))
	require.ErrorContains(t, err, "not under secrets.files_dir", "a symlink out is refused")
	_, err = r.Resolve("A", "file:"+dir+"/../"+filepath.Base(outside))
	require.Error(t, err)
	_, err = r.Resolve("A", "env:DATABASE_URL")
	require.ErrorContains(t, err, "MANTIS_SECRET_")
	_, err = secretenv.Resolver{}.Resolve("A", "file:"+outside)
	require.ErrorContains(t, err, "secrets.files_dir")
}
