// Package activities holds Mantis's Temporal activities: the steps of the dispatch and
// deployment workflows that touch PostgreSQL and the broker. Activities are methods on
// Activities, which holds their dependencies; every activity is idempotent.
package activities

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mantis-deploy/mantis/internal/pgnotify"
	"github.com/mantis-deploy/mantis/internal/secretenv"
)

// DispatchConfig tunes the dispatch activities ([dispatch] and [thorax] of mandible.toml).
type DispatchConfig struct {
	// ProcessingTimeout is how long a claimed request may stay in processing before any
	// replica reclaims it (the seed's 300 s).
	ProcessingTimeout time.Duration
	// DeliveryTimeout is how long a written command may wait for a Thorax to claim it
	// before the delivery counts as failed.
	DeliveryTimeout time.Duration
	// HeartbeatTimeout is how recent a Thorax heartbeat must be for the instance to be live.
	HeartbeatTimeout time.Duration
}

// Hooks lets tests stop an activity at a chosen point. Production leaves it empty.
type Hooks struct {
	// AfterClaim runs after a claim has committed, before the activity returns.
	AfterClaim func(ctx context.Context)
}

// Activities holds what the activities need. Workflows reference its methods through a
// nil *Activities, so only the method names reach them.
type Activities struct {
	DB       *pgxpool.Pool
	Logger   *slog.Logger
	Metrics  *Metrics
	Dispatch DispatchConfig
	// Broker is nil when [queue] enabled = false: commands then reach Thorax through
	// its polling alone.
	Broker Broker
	// Notifications wakes AdvanceStep when results land; nil falls back to
	// re-reading every few seconds.
	Notifications *pgnotify.Hub
	// Wakes is shared with the replica's wake-up forwarder, which it tells whether a
	// wake-up is still owed.
	Wakes *WakeCoalescer
	Hooks Hooks
	// Secrets seals the env_secret values of specs started straight from a Temporal
	// client (the codec keyring); nil refuses such specs.
	Secrets secretenv.Keyring
	// Deployments looks deployments' workflows up in Temporal, for the maintenance
	// that fails deployments whose workflow never started; nil leaves them.
	Deployments DeploymentWorkflows
}
