package cli_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/cli"
	"github.com/mantis-deploy/mantis/internal/config"
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
