package cli_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/config"
	"github.com/mantis-deploy/mantis/internal/version"
)

// fakeConfig is a configuration whose String is its redacted form.
type fakeConfig struct{ path string }

func (c fakeConfig) String() string { return "path = " + c.path + ", secret = [redacted]" }

// setup returns a daemon whose loader refuses the path "bad" and whose Run records the
// configuration it was given.
func setup(t *testing.T) (cli.Daemon[fakeConfig], *fakeConfig) {
	t.Helper()
	ran := &fakeConfig{}
	return cli.Daemon[fakeConfig]{
		Use: "fake",
		Load: func(path string, _ func(string) (string, bool)) (fakeConfig, error) {
			if path == "bad" {
				return fakeConfig{}, errors.New("queue.host: required")
			}
			return fakeConfig{path: path}, nil
		},
		Log: func(fakeConfig) config.Log { return config.Log{} },
		Run: func(_ context.Context, cfg fakeConfig, logger *slog.Logger) error {
			require.NotNil(t, logger)
			*ran = cfg
			return nil
		},
	}, ran
}

func execute(root interface {
	SetArgs([]string)
	ExecuteContext(context.Context) error
}, args ...string) error {
	root.SetArgs(args)
	return root.ExecuteContext(context.Background())
}

func TestRootLoadsTheConfigAndRuns(t *testing.T) {
	t.Parallel()
	d, ran := setup(t)
	root, _ := d.Command()
	require.NoError(t, execute(root, "--config", "x.toml"))
	require.Equal(t, "x.toml", ran.path)
}

func TestCheckConfigPrintsTheRedactedConfig(t *testing.T) {
	t.Parallel()
	d, ran := setup(t)
	root, _ := d.Command()
	var out bytes.Buffer
	root.SetOut(&out)
	require.NoError(t, execute(root, "check-config", "--config", "x.toml"))
	require.Equal(t, "path = x.toml, secret = [redacted]\n", out.String())
	require.Empty(t, ran.path, "check-config must not run the daemon")
}

func TestInvalidConfigIsHeadedAndStopsTheDaemon(t *testing.T) {
	t.Parallel()
	d, ran := setup(t)
	root, load := d.Command()
	err := execute(root, "--config", "bad")
	require.EqualError(t, err, cli.ConfigInvalid+"\nqueue.host: required")
	require.Empty(t, ran.path)
	_, err = load()
	require.ErrorContains(t, err, "queue.host: required", "the returned loader is bound to --config")
}

// Without --config the daemon reads its default file when it exists; `--config ""`
// reads none, and an explicit path wins.
func TestDefaultConfigFile(t *testing.T) {
	t.Parallel()
	d, ran := setup(t)
	d.DefaultConfig = filepath.Join(t.TempDir(), "fake.toml")

	root, _ := d.Command()
	require.NoError(t, execute(root))
	require.Empty(t, ran.path, "no default file: the environment alone")

	require.NoError(t, os.WriteFile(d.DefaultConfig, nil, 0o600))
	root, _ = d.Command()
	require.NoError(t, execute(root))
	require.Equal(t, d.DefaultConfig, ran.path)

	root, _ = d.Command()
	require.NoError(t, execute(root, "--config", ""))
	require.Empty(t, ran.path, `--config "" reads no file`)

	root, _ = d.Command()
	require.NoError(t, execute(root, "--config", "x.toml"))
	require.Equal(t, "x.toml", ran.path)
}

func TestDefaultConfigIsUnderEtcMantis(t *testing.T) {
	t.Parallel()
	d, _ := setup(t)
	root, _ := d.Command()
	require.Contains(t, root.PersistentFlags().Lookup("config").Usage, "/etc/mantis/fake.toml")
}

// A configuration that does not load exits 78 (EX_CONFIG), which the units do not
// restart; any other failure exits 1.
func TestExitStatus(t *testing.T) {
	t.Parallel()
	d, _ := setup(t)
	root, _ := d.Command()
	err := execute(root, "--config", "bad")
	require.Equal(t, cli.ExitConfig, cli.ExitStatus(err))
	require.Equal(t, 78, cli.ExitStatus(fmt.Errorf("starting: %w", err)))
	require.Equal(t, 1, cli.ExitStatus(errors.New("listening on :8080: address in use")))
}

// check-config names each MANTIS_ variable the configuration does not read.
func TestCheckConfigWarnsOfUnknownVariables(t *testing.T) {
	t.Setenv("MANTIS_DATABSE_URL", "postgres://x")
	cmd := cli.Daemon[config.Thorax]{
		Use:  "thorax",
		Load: func(string, func(string) (string, bool)) (config.Thorax, error) { return config.DefaultThorax(), nil },
		Log:  func(c config.Thorax) config.Log { return c.Log },
	}
	root, _ := cmd.Command()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	require.NoError(t, execute(root, "check-config", "--config", ""))
	require.Contains(t, errOut.String(), "warning: MANTIS_DATABSE_URL is not a configuration variable of this process\n")
}

func TestSetVersionAddsTheVersionFlag(t *testing.T) {
	t.Parallel()
	cmd := &cobra.Command{Use: "mandible", RunE: func(*cobra.Command, []string) error { return nil }}
	cli.SetVersion(cmd)
	var out strings.Builder
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	require.NoError(t, cmd.Execute())
	require.Equal(t, "mandible "+version.String()+"\n", out.String())
	require.Contains(t, out.String(), runtime.Version())
}
