package main

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mantis-deploy/mantis/internal/apiclient"
	"github.com/mantis-deploy/mantis/internal/contract/api"
	"github.com/mantis-deploy/mantis/internal/testrig/devstack"
	"github.com/mantis-deploy/mantis/schema"
)

// The statements dev up runs itself: they read the database clock and the Thorax
// instance table, which no API serves.
var (
	//go:embed sql/dev_clock.sql
	devClockSQL string
	//go:embed sql/dev_thorax_instance.sql
	devThoraxInstanceSQL string
)

// devTierPoll is how often dev up checks what it waits for.
const devTierPoll = 250 * time.Millisecond

// startExecutionTier starts Thorax and the two agents, waits until Thorax has
// registered with Mandible, registers the listen-mode target through the API so that
// it is pinned to this Thorax, and waits until Thorax's heartbeat has registered the
// poll-mode target. It returns both targets.
func startExecutionTier(ctx context.Context, stack *devstack.Stack, client *apiclient.Client) ([]api.Target, error) {
	db, err := pgx.Connect(ctx, stack.Env["DATABASE_URL"])
	if err != nil {
		return nil, fmt.Errorf("connecting to PostgreSQL: %w", err)
	}
	defer db.Close(context.WithoutCancel(ctx))
	// Instances registered from now on are this run's; the database's clock decides.
	var since time.Time
	if err := db.QueryRow(ctx, devClockSQL).Scan(&since); err != nil {
		return nil, fmt.Errorf("reading the database clock: %w", err)
	}
	if err := spawnExecutionTier(stack); err != nil {
		return nil, err
	}
	var instance uuid.UUID
	err = waitTier(ctx, stack, "thorax registering with mandible", func(ctx context.Context) (bool, error) {
		err := db.QueryRow(ctx, devThoraxInstanceSQL, devThoraxName, since).Scan(&instance)
		if errors.Is(err, pgx.ErrNoRows) {
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	stack.Logger().Info("thorax registered", "instance_id", instance)
	return waitTargets(ctx, stack, client, instance)
}

// spawnExecutionTier writes the configurations of Thorax and the two agents and
// starts them.
func spawnExecutionTier(stack *devstack.Stack) error {
	thoraxBin, err := siblingBinary("thorax")
	if err != nil {
		return err
	}
	agentBin, err := siblingBinary("agent")
	if err != nil {
		return err
	}
	if err := issueDevIdentities(stack); err != nil {
		return err
	}
	files := devFiles{dir: stack.Dir(), certs: stack.Certs}
	thorax, err := thoraxDevConfig(stack.Env, files)
	if err != nil {
		return err
	}
	for _, p := range []struct {
		name, bin string
		conf      any
	}{
		{"thorax", thoraxBin, thorax},
		{devListenTarget, agentBin, agentDevConfig(files, devListenTarget, schema.ModeListen)},
		{devPollTarget, agentBin, agentDevConfig(files, devPollTarget, schema.ModePoll)},
	} {
		path, err := writeTOML(stack.Dir(), p.name+".toml", p.conf)
		if err != nil {
			return err
		}
		if err := stack.Spawn(p.name, p.bin, []string{"--config", path}, nil); err != nil {
			return err
		}
	}
	return nil
}

// waitTargets registers the listen-mode target until it is pinned to instance, and
// waits until the poll-mode target has reached it. It returns both targets.
func waitTargets(ctx context.Context, stack *devstack.Stack, client *apiclient.Client, instance uuid.UUID) ([]api.Target, error) {
	var listen, poll api.Target
	err := waitTier(ctx, stack, "the listen-mode target pinned to thorax", func(ctx context.Context) (bool, error) {
		// Registering again is an update: Mandible keeps a live assignment and otherwise
		// pins the target to the live instance with the fewest targets.
		t, err := apiclient.Targets.Create(client, ctx, api.NewTarget{
			Name: devListenTarget, Mode: schema.ModeListen, Address: devListenAgentAddr,
			Labels: map[string]string{"stack": "local"},
		})
		if err != nil {
			return false, err
		}
		listen = t
		return t.AssignedInstanceID != nil && *t.AssignedInstanceID == instance, nil
	})
	if err != nil {
		return nil, err
	}
	err = waitTier(ctx, stack, "the poll-mode agent reaching thorax", func(ctx context.Context) (bool, error) {
		targets, err := apiclient.Targets.List(client, ctx)
		if err != nil {
			return false, err
		}
		for _, t := range targets {
			if t.Name == devPollTarget && t.AssignedInstanceID != nil && *t.AssignedInstanceID == instance {
				poll = t
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return []api.Target{poll, listen}, nil
}

// waitTier polls check until it holds, a process of the stack exits, or devTierTimeout
// passes. Errors of check are retried; the last one is reported on timeout.
func waitTier(parent context.Context, stack *devstack.Stack, what string, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(parent, devTierTimeout)
	defer cancel()
	tick := time.NewTicker(devTierPoll)
	defer tick.Stop()
	var last error
	for {
		if name := stack.Exited(); name != "" {
			return fmt.Errorf("waiting for %s: %s exited; see %s", what, name, stack.LogPath(name))
		}
		ok, err := check(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return parent.Err() // stopped (Ctrl-C) while starting
			}
			if last != nil {
				return fmt.Errorf("waiting for %s: not done after %s: %w", what, devTierTimeout, last)
			}
			return fmt.Errorf("waiting for %s: not done after %s; see the logs in %s", what, devTierTimeout, filepath.Join(stack.Dir(), "logs"))
		case <-tick.C:
		}
	}
}
