package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/devstack"
	"github.com/mantis-deploy/mantis/internal/faultenv"
)

// killAndRestart SIGKILLs a server and starts it again on the same data; the fault
// ends once it is ready.
func killAndRestart(server devstack.Server) func(sc *scene) (time.Time, faultenv.Rule) {
	return func(sc *scene) (time.Time, faultenv.Rule) {
		require.NoError(sc.t, sc.s.Kill(server))
		require.NoError(sc.t, sc.s.RestartServer(server))
		return time.Now(), faultenv.AllSucceed
	}
}

// freeze holds a server with SIGSTOP for d.
func freeze(server devstack.Server, d time.Duration) func(sc *scene) (time.Time, faultenv.Rule) {
	return func(sc *scene) (time.Time, faultenv.Rule) {
		require.NoError(sc.t, sc.s.Freeze(server))
		<-time.After(d)
		require.NoError(sc.t, sc.s.Thaw(server))
		return time.Now(), faultenv.AllSucceed
	}
}

// postgresRestart stops PostgreSQL with pg_ctl in mode and starts it again.
func postgresRestart(mode devstack.PostgresStopMode) func(sc *scene) (time.Time, faultenv.Rule) {
	return func(sc *scene) (time.Time, faultenv.Rule) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		require.NoError(sc.t, sc.s.StopPostgres(ctx, mode))
		require.NoError(sc.t, sc.s.RestartServer(devstack.ServerPostgres))
		return time.Now(), faultenv.AllSucceed
	}
}

func TestBrokerKilled(t *testing.T) {
	scenario(t, "broker kill -9", "RabbitMQ SIGKILL, restarted on its data", faultenv.Options{}, faultenv.WorkloadOptions{},
		killAndRestart(devstack.ServerRabbitMQ))
}

func TestPostgresCrashRestart(t *testing.T) {
	scenario(t, "PostgreSQL crash restart", "pg_ctl stop -m immediate, start", faultenv.Options{}, faultenv.WorkloadOptions{},
		postgresRestart(devstack.PostgresStopImmediate))
}

func TestTemporalKilled(t *testing.T) {
	scenario(t, "Temporal kill -9", "dev server SIGKILL, restarted on its SQLite file", faultenv.Options{}, faultenv.WorkloadOptions{},
		killAndRestart(devstack.ServerTemporal))
}
