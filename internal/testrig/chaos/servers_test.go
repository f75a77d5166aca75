package chaos_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/internal/testrig/faultenv"
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

// killWaitRestart SIGKILLs a server while an agent is running a step, leaves it down
// for d, and starts it again.
func killWaitRestart(server devstack.Server, d time.Duration) func(sc *scene) (time.Time, faultenv.Rule) {
	return func(sc *scene) (time.Time, faultenv.Rule) {
		var running []string
		require.Eventually(sc.t, func() bool {
			running = runningSteps(sc)
			return len(running) > 0
		}, time.Minute, 50*time.Millisecond, "an agent running a step before the kill of %s", server)
		require.NoError(sc.t, sc.s.Kill(server))
		sc.t.Logf("%s killed while %d step run(s) were under way, e.g. request %s", server, len(running), running[0])
		<-time.After(d)
		require.NoError(sc.t, sc.s.RestartServer(server))
		return time.Now(), faultenv.AllSucceed
	}
}

// runningSteps lists the dispatch requests an agent is running now: a ledger line
// (written as the step's command starts) whose command has no stored result yet.
func runningSteps(sc *scene) []string {
	entries, err := sc.c.ReadLedger()
	if err != nil || len(entries) == 0 {
		return nil
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		ids = append(ids, e.DispatchRequestID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := sc.c.Pool.Query(ctx, `
		SELECT DISTINCT l.id FROM unnest($1::text[]) AS l(id)
		WHERE NOT EXISTS (SELECT 1 FROM command_queue q WHERE q.dispatch_request_id::text = l.id
		                  AND (q.exit_code IS NOT NULL OR coalesce(q.error, '') <> ''))`, ids)
	if err != nil {
		return nil
	}
	running, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil
	}
	return running
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
