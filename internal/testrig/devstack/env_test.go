package devstack_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
)

// envValues are values stack.env must carry unchanged: quotes of both kinds,
// spaces, and what a shell would otherwise expand.
var envValues = map[string]string{
	"PLAIN":        "postgres://mantis@127.0.0.1:5433/mantis?sslmode=disable",
	"SPACES":       "  a value with  spaces  ",
	"SINGLE_QUOTE": "it's",
	"ONLY_QUOTE":   "'",
	"QUOTED_END":   "ends with '",
	"DOUBLE_QUOTE": `say "hi"`,
	"MIXED":        `'"' and "'"`,
	"SHELL":        "$HOME `id` $(id) \\n ; # & | * ~",
	"EQUALS":       "a=b=c",
	"EMPTY":        "",
}

func TestWriteEnvReadEnvRoundTrip(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stack.env")
	stack := &devstack.Stack{Env: map[string]string{"PLAIN": "overridden by extra", "ONLY_IN_STACK": "from the stack"}}
	require.NoError(t, stack.WriteEnv(path, envValues))

	got, err := devstack.ReadEnv(path)
	require.NoError(t, err)
	want := map[string]string{"ONLY_IN_STACK": "from the stack"}
	for k, v := range envValues {
		want[k] = v
	}
	require.Equal(t, want, got)

	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "stack.env holds passwords")
}

func TestWriteEnvIsSourceableByTheShell(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "stack.env")
	require.NoError(t, (&devstack.Stack{}).WriteEnv(path, envValues))
	for k, v := range envValues {
		// printf, not echo: echo may interpret backslashes.
		out, err := exec.Command("sh", "-c", `. "$1" && printf '%s|' "$`+k+`"`, "sh", path).CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Equal(t, v, strings.TrimSuffix(string(out), "|"), k)
	}
}
