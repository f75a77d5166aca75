package config_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/config"
)

func TestDatabaseDirectURLAndExecMode(t *testing.T) {
	t.Parallel()
	const pooler = "postgres://mantis:pw@pgbouncer:6432/mantis"
	const direct = "postgres://mantis:pw@postgres:5432/mantis"

	d := validMandible().Database
	require.Equal(t, config.QueryExecModeAuto, d.QueryExecMode)
	require.Equal(t, d.URL, d.Direct(), "no direct_url: sessions use url")
	require.False(t, d.Pooled())
	require.Equal(t, config.QueryExecModeCacheStatement, d.ExecMode())

	d.URL, d.DirectURL = pooler, direct
	require.True(t, d.Pooled())
	require.Equal(t, direct, d.Direct())
	require.Equal(t, config.QueryExecModeCacheDescribe, d.ExecMode(), "behind a pooler, no prepared statements kept on the server")

	d.QueryExecMode = config.QueryExecModeSimpleProtocol
	require.Equal(t, config.QueryExecModeSimpleProtocol, d.ExecMode(), "an explicit mode wins")

	c := validMandible()
	c.Database.QueryExecMode = "fast"
	c.Database.DirectURL = "mysql://x"
	require.Equal(t, []string{
		`database.direct_url: must be a postgres:// or postgresql:// URL, got scheme "mysql"`,
		`database.query_exec_mode: must be one of auto, cache_statement, cache_describe, describe_exec, exec, simple_protocol, got "fast"`,
	}, problems(t, c.Validate()))
	c.Database.DirectURL = direct
	require.NotContains(t, c.String(), ":pw@", "direct_url is redacted")
}
