package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.temporal.io/sdk/client"

	"github.com/mantis-deploy/mantis/schema"
)

// MonitorOptions configures a replica's liveness monitor.
type MonitorOptions struct {
	DB        *pgxpool.Pool
	Temporal  client.Client
	Namespace string
	ReplicaID string
	// HeartbeatTimeout is [thorax] heartbeat_timeout.
	HeartbeatTimeout time.Duration
	// ResultGrace is [thorax] result_grace.
	ResultGrace time.Duration
	// ProcessingTimeout is [dispatch] processing_timeout; a replica silent for half
	// of it is gone.
	ProcessingTimeout time.Duration
	Logger            *slog.Logger
}

// errStalled refuses a verdict reached across a stall of this replica.
var errStalled = errors.New("this replica stalled while judging: verdict dropped")

// Monitor is the part of every replica that settles what nobody reports. On each tick
// it heartbeats the replica's own row, then, once it has itself been healthy for a
// whole heartbeat timeout: marks silent Thorax instances dead (their listen targets
// move and their in-flight deployments fail), fails commands running past timeout +
// grace, gives unserved listen targets to a live instance, tells the workflows of
// deployments failed outside them, and ends the dispatcher workflows of replicas that
// are gone. Every replica runs it; each verdict is taken once.
type Monitor struct {
	opts     MonitorOptions
	interval time.Duration
	// healthySince is when this replica last started or recovered (monotonic).
	healthySince time.Time
	// recovered is set until the replica's row has recorded the recovery.
	recovered bool
	lastTick  time.Time
}

// NewMonitor returns the replica's monitor; Run starts it.
func NewMonitor(opts MonitorOptions) *Monitor {
	goneAfter := opts.ProcessingTimeout / 2
	interval := max(min(opts.HeartbeatTimeout/5, goneAfter/4), 100*time.Millisecond)
	return &Monitor{opts: opts, interval: interval, healthySince: time.Now(), recovered: true}
}

// Run ticks until ctx ends, then records that the replica stopped.
func (m *Monitor) Run(ctx context.Context) error {
	tick := time.NewTicker(m.interval)
	defer tick.Stop()
	m.tick(ctx)
	for {
		select {
		case <-ctx.Done():
			stopCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			if err := schema.MarkReplicaStopped(stopCtx, m.opts.DB, m.opts.ReplicaID); err != nil {
				m.opts.Logger.WarnContext(ctx, "recording replica stop failed", "err", err)
			}
			return nil
		case <-tick.C:
		}
		m.tick(ctx)
	}
}

// recover restarts the replica's own grace: nothing is judged for a heartbeat
// timeout, so that every Thorax has a full timeout to reach it again.
func (m *Monitor) recover(ctx context.Context, now time.Time, why string) {
	if !m.recovered {
		m.opts.Logger.WarnContext(ctx, "replica recovering: no thorax instance is judged for a heartbeat timeout",
			"why", why, "heartbeat_timeout", m.opts.HeartbeatTimeout)
	}
	m.healthySince, m.recovered = now, true
}

// stalled reports whether more time passed since start than one tick can take:
// the process was paused, or its database or network hung.
func (m *Monitor) stalled(start time.Time) bool {
	return time.Since(start) > m.interval+time.Second
}

func (m *Monitor) tick(ctx context.Context) {
	start := time.Now()
	if !m.lastTick.IsZero() && start.Sub(m.lastTick) > 2*m.interval+time.Second {
		m.recover(ctx, start, fmt.Sprintf("no tick for %s", start.Sub(m.lastTick).Round(time.Millisecond)))
	}
	m.lastTick = start
	log := m.opts.Logger
	if err := schema.RecordReplicaHeartbeat(ctx, m.opts.DB, m.opts.ReplicaID, m.recovered); err != nil {
		if ctx.Err() == nil {
			log.WarnContext(ctx, "recording replica heartbeat failed", "err", err)
			m.recover(ctx, time.Now(), "database unreachable")
		}
		return
	}
	if m.stalled(start) {
		m.recover(ctx, time.Now(), "replica heartbeat took "+time.Since(start).Round(time.Millisecond).String())
		return
	}
	m.recovered = false
	m.endGoneReplicas(ctx)
	if time.Since(m.healthySince) < m.opts.HeartbeatTimeout {
		return
	}
	m.judgeInstances(ctx, start)
	if m.stalled(start) {
		return
	}
	if failed, err := schema.FailOverdueCommands(ctx, m.opts.DB, m.opts.ResultGrace); err != nil {
		log.WarnContext(ctx, "failing overdue commands failed", "err", err)
	} else if len(failed) > 0 {
		log.WarnContext(ctx, "failed commands with no result within timeout + grace", "commands", len(failed), "grace", m.opts.ResultGrace)
	}
	if n, err := schema.AssignListenTargets(ctx, m.opts.DB); err != nil {
		log.WarnContext(ctx, "assigning unserved listen targets failed", "err", err)
	} else if n > 0 {
		log.InfoContext(ctx, "assigned unserved listen targets to live thorax instances", "targets", n)
	}
	m.tellWorkflows(ctx)
}

// judgeInstances marks silent instances dead, refusing any verdict whose
// transaction outlived a tick: across a stall, silence proves nothing.
func (m *Monitor) judgeInstances(ctx context.Context, start time.Time) {
	dead, err := schema.MarkDeadInstances(ctx, m.opts.DB, schema.DeathRules{
		Timeout:          m.opts.HeartbeatTimeout,
		ReplicaGoneAfter: m.opts.ProcessingTimeout / 2,
		BeforeCommit: func() error {
			if m.stalled(start) {
				return errStalled
			}
			return nil
		},
	})
	switch {
	case errors.Is(err, errStalled):
		m.recover(ctx, time.Now(), errStalled.Error())
	case err != nil && ctx.Err() == nil:
		m.opts.Logger.WarnContext(ctx, "checking thorax heartbeats failed", "err", err)
	}
	for _, d := range dead {
		m.opts.Logger.WarnContext(ctx, "thorax instance stopped heartbeating: marked dead",
			"instance_id", d.ID, "name", d.Name, "reassigned_targets", len(d.Reassigned),
			"lost_commands", len(d.LostCommands), "failed_deployments", len(d.FailedDeployments))
	}
}
