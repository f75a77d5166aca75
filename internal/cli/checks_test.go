package cli_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/cli"
)

func TestCheckConfigConnectPrintsALinePerCheckAndFailsNamingThem(t *testing.T) {
	t.Parallel()
	d, _ := setup(t)
	ran := 0
	d.Checks = func(fakeConfig, *slog.Logger) []cli.Check {
		return []cli.Check{
			{Name: "db", Run: func(context.Context) (string, error) { ran++; return "version 3", nil }},
			{Name: "broker", Run: func(context.Context) (string, error) { ran++; return "", errors.New("refused\nby peer") }},
			{Name: "temporal", Run: func(context.Context) (string, error) { ran++; return "", nil }},
		}
	}

	root, _ := d.Command()
	var out bytes.Buffer
	root.SetOut(&out)
	require.NoError(t, execute(root, "check-config", "--config", "x.toml"))
	require.Zero(t, ran, "without --connect nothing is reached")

	out.Reset()
	err := execute(root, "check-config", "--connect", "--config", "x.toml")
	require.EqualError(t, err, "dependency checks failed: broker: refused by peer")
	require.Equal(t, "path = x.toml, secret = [redacted]\n"+
		"db: ok (version 3)\nbroker: FAILED: refused by peer\ntemporal: ok\n", out.String())
	require.Equal(t, 3, ran)
}
