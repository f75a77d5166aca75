package deploy_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/testrig/testenv"
)

// Each daemon, built as shipped, exits with the status its unit's
// RestartPreventExitStatus names when its configuration does not load (an unknown
// key here), so that systemd stops it instead of restarting it forever.
func TestDaemonsExitWithTheUnitsNoRestartStatusOnABadConfig(t *testing.T) {
	t.Parallel()
	config := filepath.Join(t.TempDir(), "bad.toml")
	require.NoError(t, os.WriteFile(config, []byte("colour = \"blue\"\n"), 0o600))
	for _, name := range []string{"mandible", "thorax", "agent"} {
		unit := unitSettings(t, "systemd/mantis-"+name+".service")
		require.Equal(t, []string{strconv.Itoa(cli.ExitConfig)}, unit["RestartPreventExitStatus"], name)

		cmd := exec.Command(testenv.Binary(t, name), "--config", config)
		cmd.Env = []string{"PATH=" + os.Getenv("PATH")} // none of the caller's MANTIS_ variables
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		require.True(t, errors.As(err, &exit), "%s: %v\n%s", name, err, out)
		require.Equal(t, cli.ExitConfig, exit.ExitCode(), "%s:\n%s", name, out)
		require.Contains(t, string(out), "invalid configuration:", name)
	}
}
