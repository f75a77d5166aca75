package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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

// killWaitRestart SIGKILLs a server, leaves it down for d, and starts it again.
func killWaitRestart(server devstack.Server, d time.Duration) func(sc *scene) (time.Time, faultenv.Rule) {
	return func(sc *scene) (time.Time, faultenv.Rule) {
		require.NoError(sc.t, sc.s.Kill(server))
		<-time.After(d)
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

func TestBrokerStopStart(t *testing.T) {
	full(t)
	scenario(t, "broker stop/start", "rabbitmqctl stop_app, 10 s, start_app", faultenv.Options{}, faultenv.WorkloadOptions{},
		func(sc *scene) (time.Time, faultenv.Rule) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			_, err := sc.s.RabbitMQCtl(ctx, "stop_app")
			require.NoError(t, err)
			<-time.After(10 * time.Second)
			_, err = sc.s.RabbitMQCtl(ctx, "start_app")
			require.NoError(t, err)
			return time.Now(), faultenv.AllSucceed
		})
}

func TestBrokerFrozen(t *testing.T) {
	full(t)
	scenario(t, "broker frozen", "RabbitMQ SIGSTOP 30 s", faultenv.Options{}, faultenv.WorkloadOptions{},
		freeze(devstack.ServerRabbitMQ, 30*time.Second))
}

func TestPostgresFastRestart(t *testing.T) {
	full(t)
	scenario(t, "PostgreSQL fast restart", "pg_ctl stop -m fast, start", faultenv.Options{}, faultenv.WorkloadOptions{},
		postgresRestart(devstack.PostgresStopFast))
}

func TestPostgresFrozen(t *testing.T) {
	full(t)
	scenario(t, "PostgreSQL frozen", "PostgreSQL SIGSTOP 30 s", faultenv.Options{}, faultenv.WorkloadOptions{},
		freeze(devstack.ServerPostgres, 30*time.Second))
}

// Another client takes every connection PostgreSQL allows and holds them 30 s.
func TestPostgresOutOfConnections(t *testing.T) {
	full(t)
	scenario(t, "PostgreSQL out of connections", "another client holds every connection 30 s", faultenv.Options{}, faultenv.WorkloadOptions{},
		func(sc *scene) (time.Time, faultenv.Rule) {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			var held []*pgx.Conn
			for {
				conn, err := pgx.Connect(ctx, sc.s.AdminURL())
				if err != nil {
					break
				}
				held = append(held, conn)
			}
			require.NotEmpty(t, held)
			t.Logf("holding %d connections", len(held))
			<-time.After(30 * time.Second)
			for _, conn := range held {
				_ = conn.Close(ctx)
			}
			return time.Now(), faultenv.AllSucceed
		})
}
